"""The GPU benchmark in one command (bench/gpu.sh installs what the machine lacks, then runs this):

    bench/gpu.sh                 # on a GPU machine, from the repository root
    bench/gpu.sh --dry-run       # the same steps on the CPU, on a tiny graph (what the tests run)
    bench/gpu.sh --steps train   # some of the steps: check,train,test,calibrate,shard (default all)

Steps, each printed as it starts:
  check      torch, the device, and which dropout kernels CUDA gets (Triton, or the torch fallback)
  train      bench_train on rmat:22:16 (sharded first unless bench/results/train/ has it): a plain
             PyTorch GCN, gtool 1x1x1 over NCCL and a PyG GCNConv GCN (a note instead when
             torch_geometric does not import), hidden 128, 3 layers, dropout 0.5
  test       the CUDA tests: the compiled Triton kernels against the torch specification, and ranks
             sharing the GPU through gloo training like one rank
  calibrate  gtool plan --calibrate --device cuda, into bench/results/gpu/profile-cuda.json
  shard      the machine's CPU cores for `gtool shard`: bench_shard's worker sweep (1, 2, 4, ... up to
             the cores this process may use, three rounds) on rmat:22:16 at --memory-limit 8GB, the
             16-core figure docs/shard.md reports (about 5 minutes on 16 cores; alone: --steps shard)
and at the end the table (epoch, SpMM, dense, comm, GPU peak; median epoch after the first) and the
profile. The dry run does all of it on the CPU: rmat:9:4, hidden 8, 2 epochs, gloo, the CUDA tests
collected and skipped, a calibration shrunk to seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench import bench_train
from bench.common import REPO, RESULTS
from gtool.cores import available_cores

OUT = RESULTS / "gpu"
PROFILE = "profile-{device}.json"
CUDA_TESTS = [
    "tests/trainer/nn/dropout/test_dropout_triton.py::test_cuda_kernels_draw_the_specified_masks",
    "tests/trainer/nn/fused/test_fused_triton.py::test_cuda_kernels_equal_the_specification",
    "tests/trainer/test_cli_train.py::test_ranks_on_one_gpu_through_gloo_train_like_one_rank",
]
STEPS = ("check", "train", "test", "calibrate", "shard")
RUNS = {
    "gpu": ["--device", "cuda", "--scale", "22", "--edge-factor", "16", "--epochs", "10"],
    "dry-run": ["--device", "cpu", "--scale", "9", "--edge-factor", "4", "--epochs", "2", "--hidden", "8"],
}
"""bench_train's arguments besides the grid (1x1x1) and the PyG row."""
SWEEPS = {
    "gpu": ["--source", "rmat:22:16", "--memory-limit", "8GB", "--rounds", "3"],
    "dry-run": ["--source", "rmat:12:8", "--rounds", "1"],
}
"""bench_shard's worker sweep besides the worker counts."""


def worker_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to `cores`, and `cores` itself."""
    counts = [1 << k for k in range(cores.bit_length()) if 1 << k <= cores]
    return counts if counts[-1] == cores else [*counts, cores]


def step(name: str) -> None:
    print(f"\n== {name} ({time.strftime('%H:%M:%S')})", flush=True)


def check(device: str) -> None:
    """What the run will use; on a GPU machine, stop early without CUDA."""
    import torch

    from gtool.trainer.nn.dropout import cuda_notice

    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, devices: {torch.cuda.device_count()}")
    if device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench/gpu.sh: torch sees no CUDA GPU (bench/gpu.sh --dry-run runs on the CPU)")
        print(f"GPU 0: {torch.cuda.get_device_name(0)}")
    try:
        import triton

        print(f"triton {triton.__version__}")
    except ImportError:
        pass
    print(cuda_notice() or "CUDA dropout: gtool's Triton kernels")


def shrink_calibration() -> None:
    """gtool plan --calibrate's microbenchmarks and epoch runs cut to seconds (the dry run's)."""
    import gtool.plan.calibration.epochs as epochs
    import gtool.plan.calibration.microbench as micro

    micro.SPMM_SCALES, micro.GEMM_SHAPES = (8, 10), ((256, 8, 8), (1024, 16, 16))
    micro.ELEMENTWISE_SIZES = micro.MESSAGE_BYTES = (1 << 10, 1 << 14)
    micro.ALLOCATION_BYTES = (1 << 16, 1 << 20)
    epochs.EPOCH_SCALES, epochs.EPOCH_HIDDENS, epochs.EPOCHS, epochs.WARMUP = (9,), (16,), 3, 1


def calibrate(device: str, dry_run: bool) -> Path:
    """`gtool plan --calibrate` over the GPUs there are (the dry run: in this process, shrunk, on one CPU
    rank); returns the profile's path."""
    OUT.mkdir(parents=True, exist_ok=True)
    profile = OUT / PROFILE.format(device=device)
    arguments = ["plan", "--calibrate", "--device", device, "-o", str(profile)]
    if dry_run:
        from gtool.cli.main import app

        shrink_calibration()
        app([*arguments, "--max-group", "1"], standalone_mode=False)
    else:
        subprocess.run([sys.executable, "-m", "gtool.cli", *arguments], check=True, cwd=REPO)
    return profile


def print_profile(path: Path) -> None:
    """The profile's fitted costs, one line per entry (its raw measurements left out)."""
    content = json.loads(path.read_text())
    content.pop("measurements", None)
    print(f"profile {path}:")
    for key, value in content.items():
        print(f"  {key}: {json.dumps(value)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="bench/gpu.sh", description=__doc__, formatter_class=formatter)
    parser.add_argument("--dry-run", action="store_true", help="every step on the CPU on a tiny graph")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {','.join(STEPS)}")
    args = parser.parse_args(argv)
    args.steps = args.steps.split(",")
    if unknown := sorted(set(args.steps) - set(STEPS)):
        parser.error(f"unknown step(s) {', '.join(unknown)}; steps are {', '.join(STEPS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run = RUNS["dry-run" if args.dry_run else "gpu"]
    train_args = bench_train.parse_args([*run, "--grids", "1x1x1", "--pyg"])
    device = train_args.device
    rows, profile = None, None
    if "check" in args.steps:
        step("check")
        check(device)
    if "train" in args.steps:
        step(f"train: rmat:{train_args.scale}:{train_args.edge_factor} on {device}")
        rows = bench_train.run(train_args)
    if "test" in args.steps:
        step("test: the CUDA tests" + (" (collected and skipped without CUDA)" if args.dry_run else ""))
        command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *CUDA_TESTS]
        subprocess.run(command, check=True, cwd=REPO)
    if "calibrate" in args.steps:
        step(f"calibrate: gtool plan --calibrate --device {device}")
        profile = calibrate(device, args.dry_run)
    if "shard" in args.steps:
        counts = worker_counts(2 if args.dry_run else available_cores())
        step(f"shard: bench_shard's sweep over {','.join(map(str, counts))} workers")
        sweep = ["--workers", ",".join(map(str, counts)), *SWEEPS["dry-run" if args.dry_run else "gpu"]]
        subprocess.run([sys.executable, "-m", "bench.bench_shard", *sweep], check=True, cwd=REPO)
    step("results")
    if rows is not None:
        bench_train.print_table(rows, train_args)
    if profile is not None:
        print_profile(profile)


if __name__ == "__main__":
    main()
