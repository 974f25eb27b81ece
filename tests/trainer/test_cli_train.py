"""`gtool train` run the way a user runs it: killed and resumed, a failing rank, a killed rank, bad flags,
and several ranks sharing one GPU."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import torch
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.environment import free_port
from gtool.trainer.launch.local import NOTES_STALE_S
from tests.support.load import scaled
from tests.support.ranks import local_ranks
from tests.support.storefiles import array_chunks
from tests.support.stores import StoreFactory
from tests.trainer.minibatch_cases import serial_losses

pytestmark = pytest.mark.integration  # builds stores / runs the command line

TRAIN = [sys.executable, "-m", "gtool.cli", "train"]
MODEL = ["--layers", "2", "--hidden", "16", "--dropout", "0.5"]


def gtool_train(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAIN, *args], capture_output=True, text=True, timeout=timeout)


def gtool_train_here(*args: str) -> subprocess.CompletedProcess:
    """`gtool train ARGS` in this process (typer's runner): for what is refused before any rank starts."""
    result = CliRunner().invoke(app, ["train", *args], env={"COLUMNS": "400"})
    return subprocess.CompletedProcess(
        ["gtool", "train", *args], result.exit_code, result.stdout, result.stderr
    )


def start_gtool_train(*args: str) -> subprocess.Popen:
    """`gtool train` in its own process group (so that the test can kill it with all its ranks)."""
    return subprocess.Popen(
        [*TRAIN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def latest_epoch(checkpoints: Path) -> int:
    return json.loads((checkpoints / "latest.json").read_text())["epoch"]


def final_state(checkpoints: Path, ranks: int) -> list[dict]:
    epoch_dir = checkpoints / json.loads((checkpoints / "latest.json").read_text())["path"]
    return [torch.load(epoch_dir / f"rank-{rank:05d}.pt", weights_only=True) for rank in range(ranks)]


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("rmat:9:8", tiles=4, num_features=32, num_classes=6)


def test_killed_run_resumes_to_the_uninterrupted_result(store: str, tmp_path: Path) -> None:
    epochs = 60
    common = [store, "--grid", "2x1x1", *MODEL, "--epochs", str(epochs), "--checkpoint-every", "3"]
    whole = gtool_train(*common, "--checkpoint", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr

    interrupted = tmp_path / "interrupted"
    run = start_gtool_train(*common, "--checkpoint", str(interrupted))
    wait_for(lambda: (interrupted / "latest.json").exists(), "the first checkpoint")
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    killed_at = latest_epoch(interrupted)
    assert killed_at < epochs, "the run finished before it was killed: give it more epochs"
    left = list(Path(tempfile.gettempdir()).glob(f"gtool-ranks-{run.pid}@*"))
    assert len(left) == 1, "a launcher killed by SIGKILL cannot remove its ranks' notes folder"
    os.utime(left[0], (0, time.time() - 2 * NOTES_STALE_S))  # as if a minute had passed since the kill

    resumed = gtool_train(*common, "--checkpoint", str(interrupted), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert not left[0].exists(), "the next launch removes the folder of a launcher that no longer runs"
    assert f"at epoch {killed_at + 1}" in resumed.stdout
    for got, want in zip(final_state(interrupted, 2), final_state(tmp_path / "whole", 2), strict=True):
        for part in ("model", "optimizer"):
            assert got[part].keys() == want[part].keys()
            for name, tensor in want[part].items():
                assert torch.equal(got[part][name], tensor), f"{part} {name} differs after resuming"


def test_a_failing_rank_stops_every_rank(store: str, tmp_path: Path) -> None:
    """Only rank 1 of a 2x1x1 one-layer aggregate-first run reads tile (3, 3) (its rows are band x): damage
    it and rank 1 fails while loading."""
    broken = tmp_path / "broken.zarr"
    shutil.copytree(store, broken)
    for chunk in array_chunks(broken / "adj" / "0" / "3_3" / "val"):
        chunk.write_bytes(b"not a zarr chunk")
    started = time.monotonic()
    flags = ["--layers", "1", "--layer-order", "aggregate-first", "--epochs", "3"]
    run = gtool_train(str(broken), "--grid", "2x1x1", *flags, timeout=120)
    assert time.monotonic() - started < scaled(60)
    assert run.returncode == 2
    assert "rank 1 failed" in run.stderr and "(3, 3)" in run.stderr and "array adj/0/3_3/val" in run.stderr


def test_a_killed_rank_stops_every_rank(store: str, tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    run = start_gtool_train(
        store, "--grid", "2x1x1", *MODEL, "--epochs", "100000", "--checkpoint", str(checkpoints)
    )
    wait_for(lambda: (checkpoints / "latest.json").exists(), "training to start")
    children = psutil.Process(run.pid).children(recursive=True)
    ranks = local_ranks(run.pid)
    assert len(ranks) == 2
    victim = ranks[1]
    victim.kill()
    stderr = run.communicate(timeout=scaled(60))[1]
    assert run.returncode == 2
    assert "killed by signal SIGKILL" in stderr and "leaked semaphore" not in stderr, stderr
    _, alive = psutil.wait_procs(children, timeout=scaled(10))
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_a_stopped_rank_is_named_when_the_others_give_up(store: str, tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    flags = ["--epochs", "100000", "--checkpoint", str(checkpoints), "--timeout", "3"]
    run = start_gtool_train(store, "--grid", "2x1x1", *MODEL, *flags)
    wait_for(lambda: (checkpoints / "latest.json").exists(), "training to start")
    children = psutil.Process(run.pid).children(recursive=True)
    ranks = local_ranks(run.pid)
    assert len(ranks) == 2
    ranks[1].suspend()  # SIGSTOP
    stderr = run.communicate(timeout=scaled(60))[1]
    assert run.returncode == 2
    assert "error: rank 1 failed: stopped (SIGSTOP" in stderr and "rank 0 gave up waiting" in stderr, stderr
    assert "Terminating process" not in stderr, stderr  # torch's own lines about stopping the others
    _, alive = psutil.wait_procs(children, timeout=scaled(10))
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_a_hangup_stops_the_launch_and_every_rank_and_says_so(store: str, tmp_path: Path) -> None:
    """The terminal closing sends SIGHUP to the whole foreground group: the launcher decides (its supervisor
    and ranks leave it to it), stops them and ends as SIGTERM would, with 129."""
    checkpoints = tmp_path / "checkpoints"
    run = start_gtool_train(
        store, "--grid", "2x1x1", *MODEL, "--epochs", "100000", "--checkpoint", str(checkpoints)
    )
    wait_for(lambda: (checkpoints / "latest.json").exists(), "training to start")
    children = psutil.Process(run.pid).children(recursive=True)
    assert len(local_ranks(run.pid)) == 2
    os.killpg(run.pid, signal.SIGHUP)
    stderr = run.communicate(timeout=scaled(60))[1]
    assert run.returncode == 129, stderr
    assert "hung up: the latest complete checkpoint (if any) can be resumed" in stderr, stderr
    _, alive = psutil.wait_procs(children, timeout=scaled(10))
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_runs_as_the_ranks_torchrun_starts(store: str) -> None:
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    torchrun += ["--master-port", str(free_port()), "-m", "gtool.cli", "train", store, "--grid", "2x1x1"]
    run = subprocess.run([*torchrun, *MODEL, "--epochs", "2"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "grid 2x1x1 (2 ranks, torchrun)" in run.stdout and "epoch    2" in run.stdout


def start_torchrun_training(store: str, checkpoints: Path, stderr: Path) -> tuple[subprocess.Popen, list]:
    """Two ranks under torchrun, training until stopped: the launch and its ranks 0 and 1."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    torchrun += ["--master-port", str(free_port()), "-m", "gtool.cli", "train", store, "--grid", "2x1x1"]
    flags = [*MODEL, "--epochs", "100000", "--checkpoint", str(checkpoints)]
    flags += ["--timeout", "15"]  # a collective gloo never fails (its peer killed while this rank was
    # stopped: about 1 run in 7 on a loaded machine) gives up within torchrun's 30 s before SIGKILL
    with stderr.open("w") as log:
        run = subprocess.Popen(
            [*torchrun, *flags], stdout=subprocess.DEVNULL, stderr=log, text=True, start_new_session=True
        )
    wait_for(lambda: (checkpoints / "latest.json").exists(), "training to start")
    workers = [p for p in psutil.Process(run.pid).children() if "gtool.cli" in " ".join(p.cmdline())]
    assert len(workers) == 2
    return run, sorted(workers, key=lambda p: int(p.environ()["RANK"]))


def test_a_killed_torchrun_rank_is_named_by_the_rank_that_saw_it_go(store: str, tmp_path: Path) -> None:
    """Rank 0 said "rank 0 failed: ... Connection closed by peer" when rank 1 was killed."""
    stderr = tmp_path / "stderr"
    run, (_, rank_1) = start_torchrun_training(store, tmp_path / "checkpoints", stderr)
    rank_1.kill()
    run.wait(timeout=120)
    # rank 0 either sees its peer go first or is stopped by torchrun first: either way rank 1 is named
    assert "error: rank 1 failed: its process ended; " in stderr.read_text(), stderr.read_text()
    assert "error: rank 0 failed" not in stderr.read_text(), stderr.read_text()


def test_a_rank_torchrun_stops_names_the_rank_that_died(store: str, tmp_path: Path) -> None:
    """torchrun's SIGTERM reached rank 0 before rank 0 saw rank 1 go: it said only "terminated"."""
    stderr = tmp_path / "stderr"
    run, (rank_0, rank_1) = start_torchrun_training(store, tmp_path / "checkpoints", stderr)
    rank_0.suspend()  # SIGSTOP: the SIGTERM torchrun sends waits until it runs again
    rank_1.kill()
    wait_for(lambda: "closing signal SIGTERM" in stderr.read_text(), "torchrun to stop rank 0")
    rank_0.resume()
    run.wait(timeout=120)
    assert "error: rank 1 failed: its process ended; " in stderr.read_text(), stderr.read_text()
    assert "error: rank 0 failed" not in stderr.read_text(), stderr.read_text()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--grid", "2x2"], "--grid must be 3 positive integers"),
        (["--dropout", "1.5"], "--dropout must be in [0, 1)"),
        (["--resume"], "--resume needs --checkpoint DIR"),
        (["--backend", "nccl", "--device", "cpu"], "--backend nccl needs --device cuda"),
        (["--batch-size", "513"], "--batch-size 513 is more than the 512 nodes of"),  # before ranks start
        (["--features-from", "store"], "--features-from store needs --batch-size"),
        (["--batch-size", "64", "--features-from", "store", "--eval", "full"], "--eval full needs every"),
        (["--batch-size", "64", "--features-from", "store", "--learnable-features"], "--learnable-features"),
    ],
)
def test_bad_flags_are_reported(store: str, flags: list[str], message: str) -> None:
    run = gtool_train_here(store, *flags)
    assert run.returncode == 2
    assert message in run.stderr and "Traceback" not in run.stderr


def test_sampled_evaluation_of_a_multi_label_store_is_refused_before_any_rank_starts(
    stores: StoreFactory,
) -> None:
    """It was refused by every rank as it started ('rank 0 failed: GtoolError: ...')."""
    store = stores("sbm-multi:301:3:5", tiles=2)
    run = gtool_train_here(store, "--batch-size", "64", "--features-from", "store")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("error: --eval sampled sums accuracies"), run.stderr
    assert "rank" not in run.stderr


def test_resuming_a_finished_run_trains_nothing(store: str, tmp_path: Path) -> None:
    """It said 'mean epoch time nans (spmm nan, ...)' and named no checkpoint."""
    checkpoints = str(tmp_path / "checkpoints")
    first = gtool_train(store, *MODEL, "--epochs", "2", "--eval-every", "5", "--checkpoint", checkpoints)
    assert first.returncode == 0, first.stderr
    again = gtool_train(store, *MODEL, "--epochs", "2", "--checkpoint", checkpoints, "--resume")
    assert again.returncode == 0, again.stderr
    assert "nothing left to train" in again.stdout + again.stderr
    assert "epoch    1" not in again.stdout
    assert "nan" not in again.stdout  # was 'mean epoch time nans (spmm nan, ...)', and no checkpoint line
    assert "n/a (no epoch trained)" in again.stdout
    cells = re.sub(r"[\s│]+", " ", again.stdout)  # the table's text, at any width
    assert "│ checkpoint " in again.stdout and "(latest epoch 2, best validation epoch 2)" in cells


def test_a_missing_store_is_reported_before_any_rank_starts(tmp_path: Path) -> None:
    run = gtool_train_here(str(tmp_path / "nope.zarr"), "--grid", "2x2x2")
    assert run.returncode == 2
    assert "nope.zarr: not a gtool store" in run.stderr and "rank" not in run.stderr


def logged_losses(log: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in log.read_text().splitlines() if '"summary"' not in line]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_ranks_on_one_gpu_through_gloo_train_like_one_rank(store: str, tmp_path: Path) -> None:
    """--device cuda beside --backend gloo: multi-rank grids on one GPU lose, epoch by epoch, what 1x1x1
    loses on the GPU, and on the CPU (CPU and CUDA draw the same dropout masks)."""

    def losses(grid: str, device: str) -> list[float]:
        log = tmp_path / f"{grid}-{device}.jsonl"
        flags = ["--grid", grid, "--device", device, "--dtype", "float64", "--epochs", "3", "--log", str(log)]
        run = gtool_train(store, *MODEL, *flags)
        assert run.returncode == 0, run.stderr
        return logged_losses(log)

    want = losses("1x1x1", "cuda")
    for grid, device in [("2x2x2", "cuda"), ("3x2x1", "cuda"), ("1x1x1", "cpu")]:
        assert losses(grid, device) == pytest.approx(want, rel=1e-5), f"{grid} on {device}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_device_cuda_without_a_gpu_is_reported(store: str) -> None:
    run = gtool_train_here(store, "--device", "cuda", "--epochs", "1")
    assert run.returncode == 2
    assert "--device cuda (--backend gloo) needs CUDA GPUs" in run.stderr and "Traceback" not in run.stderr


def test_a_4d_run_reading_its_features_from_the_store_trains_like_the_serial_model(
    store: str, tmp_path: Path
) -> None:
    """--data-parallel 2 over 2x1x1 with each step's rows read from the store: the serial model's per-step
    losses; every node's rows read once per epoch and per (sampled) evaluation by each of the 2 x-ranks
    that hold its band, and nothing more."""
    flags = {"layers": 2, "hidden": 16, "dropout": 0.5, "dtype": "float64", "batch_size": 100, "epochs": 2}
    args = [f"--{name.replace('_', '-')}={value}" for name, value in flags.items()]
    log = tmp_path / "log.jsonl"
    common = ["--grid", "2x1x1", "--data-parallel", "2", "--features-from", "store", "--log", str(log)]
    run = gtool_train(store, *args, *common)
    assert run.returncode == 0, run.stderr
    assert "(sampled)" in run.stdout
    *records, summary = [json.loads(line) for line in log.read_text().splitlines()]
    assert summary["summary"]["evaluation"] == "sampled"
    config = TrainConfig.of(store, (2, 1, 1), data_parallel=2, **flags)
    for got, want in zip([r["step_losses"] for r in records], serial_losses(config, 2), strict=True):
        for got_replica, want_replica in zip(got, want, strict=True):
            assert got_replica == pytest.approx(want_replica, rel=1e-5)
    passes = 2 * len(records)  # each epoch and its evaluation
    assert sum(r["read_bytes"] for r in records) == passes * 2 * 512 * 32 * 4
