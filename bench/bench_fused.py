"""Micro-benchmark of ScaleGNN's fused elementwise pass against the unfused torch composition.

    python -m bench.bench_fused                                   # 1M x 128 float32 on the CPU
    python -m bench.bench_fused --rows 262144 --device cuda

One block of rmat:20's size (2^20 rows x 128 hidden columns, one rank), dropout 0.5, a residual: forward
and backward of fused (`rms_relu_dropout`), unfused (RMSNorm in torch operations, then dropout's fused
`relu_dropout`, then the add) and spec (`rms_relu_dropout_reference`, masks from whole-block integer
operations). Prints per variant the median wall and CPU seconds (all threads: on a shared machine the
steadier figure) of --repeats runs after a warm-up, the peak of tensor bytes over the inputs during a
run and the bytes kept between forward and backward (live tensor storages, tests.support.tensorbytes;
on CUDA max_memory_allocated), and the ratios to unfused.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.nn.dropout import MaskSpec, relu_dropout
from gtool.trainer.nn.fused import rms_relu_dropout, rms_relu_dropout_reference
from gtool.trainer.nn.fused.reference import inverse_rms
from tests.support.tensorbytes import LiveTensorBytes


def unfused(z, gamma, col_group, width, spec, placement, residual=None, eps=1e-6, training=True):
    """The same model from separate operations: RMSNorm and scale (autograd keeps z, the normalized block
    and r), the ReLU fused with dropout (a one-byte flag), then the add; one rank (no all-reduce)."""
    normalized = z * inverse_rms(z.square().sum(dim=1), width, eps)[:, None] * gamma[None, :]
    out = relu_dropout(normalized, spec, placement)
    return out if residual is None else residual + out


VARIANTS: dict[str, Callable] = {
    "fused": rms_relu_dropout,
    "unfused": unfused,
    "spec": rms_relu_dropout_reference,
}


def inputs(rows: int, cols: int, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(0)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=dtype, device=device, generator=generator)

    return {
        "z": draw(rows, cols),
        "gamma": draw(cols),
        "residual": draw(rows, cols),
        "grad": draw(rows, cols),
    }


def step(
    function: Callable, given: dict[str, torch.Tensor], group: AxisGroup, memory=None
) -> tuple[tuple[float, float], int]:
    """Forward and backward once: (wall, CPU) seconds, and the bytes live between them beyond the inputs
    and y."""
    z, gamma = given["z"].requires_grad_(), given["gamma"].requires_grad_()
    rows, cols = z.shape
    spec = MaskSpec.of(0, 1, 1, 0.5, cols)
    synchronize(z.device)
    began, cpu = time.perf_counter(), time.process_time()
    before = memory.current if memory is not None else 0
    y = function(z, gamma, group, cols, spec, (0, rows, 0, cols), given["residual"])
    kept = memory.current - before - y.untyped_storage().nbytes() if memory is not None else 0
    y.backward(given["grad"])
    synchronize(z.device)
    seconds = (time.perf_counter() - began, time.process_time() - cpu)
    del y
    z.grad = gamma.grad = None
    return seconds, kept


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(name: str, given: dict[str, torch.Tensor], group: AxisGroup, repeats: int) -> dict[str, float]:
    function = VARIANTS[name]
    step(function, given, group)
    runs = [step(function, given, group)[0] for _ in range(repeats)]
    seconds = {"seconds": statistics.median(wall for wall, _ in runs)}
    seconds["cpu_seconds"] = statistics.median(cpu for _, cpu in runs)
    device = given["z"].device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(function, given, group)
        peak = torch.cuda.max_memory_allocated() - base
        with LiveTensorBytes() as memory:
            kept = step(function, given, group, memory)[1]
    else:
        with LiveTensorBytes() as memory:
            base = memory.current
            kept = step(function, given, group, memory)[1]
            peak = memory.peak - base
    return {**seconds, "peak_mb": peak / 2**20, "kept_mb": kept / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1 << 20)
    parser.add_argument("--cols", type=int, default=128)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, of " + ", ".join(VARIANTS)
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    group = AxisGroup(1, 0, None, PhaseTimer(device), device)
    given = inputs(args.rows, args.cols, device, getattr(torch, args.dtype))
    block_mb = args.rows * args.cols * given["z"].element_size() / 2**20
    threads = torch.get_num_threads()
    print(
        f"{args.rows} x {args.cols} {args.dtype} on {device} ({block_mb:,.0f} MB a block), {threads} threads"
    )
    results = {name: measure(name, given, group, args.repeats) for name in args.variants.split(",")}
    header = f"{'variant':<8} {'wall s':>8} {'CPU s':>8} {'peak MB':>9} {'kept MB':>9}"
    print(f"{header}  vs unfused (wall, CPU, peak)")
    for name, figures in results.items():
        row = f"{name:<8} {figures['seconds']:>8.3f} {figures['cpu_seconds']:>8.3f}"
        row += f" {figures['peak_mb']:>9,.0f} {figures['kept_mb']:>9,.0f}"
        if "unfused" in results:
            ratios = (figures[key] / results["unfused"][key] for key in ("seconds", "cpu_seconds", "peak_mb"))
            row += "  " + ", ".join(f"{ratio:.2f}x" for ratio in ratios)
        print(row)


if __name__ == "__main__":
    main()
