"""The trainer's single-process parts: launch environments, row blocks, Adam, checkpoints."""

from __future__ import annotations

import errno
import json
import math
import os
import re
from types import SimpleNamespace

import pytest
import scipy.sparse as sp
import torch

from gtool.cli.autogrid import auto_grid
from gtool.errors import GtoolError
from gtool.trainer import loop
from gtool.trainer.checkpoint import CheckpointError, Checkpoints, rank_file
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch import RankEnv, environment_rank, launch_local, numba_share, quiet_resource_tracker
from gtool.trainer.layers import split_rows
from gtool.trainer.optim import Adam
from gtool.trainer.report import EpochRecord, History, Reporter, Summary
from gtool.trainer.run import prepare_run_files
from gtool.trainer.serial import torch_csr
from tests.trainer.cases import single_rank_comm

CPU = torch.device("cpu")


def test_torchrun_environment() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "node7", "MASTER_PORT": "1234"}
    assert environment_rank(env) == RankEnv(3, 8, 1, "node7", 1234, "torchrun")


def test_srun_environment() -> None:
    env = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "6", "SLURM_LOCALID": "2", "MASTER_ADDR": "n1"}
    assert environment_rank(env) == RankEnv(5, 6, 2, "n1", 29500, "srun")


def test_plain_or_single_task_environment_launches_locally() -> None:
    assert environment_rank({}) is None
    assert environment_rank({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}) is None
    batch_script = {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_NODELIST": "n[1-2]"}
    assert environment_rank(batch_script) is None


def test_spawned_ranks_share_numba_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.setattr("gtool.trainer.launch.available_cores", lambda: 8)
    with numba_share(2):
        assert os.environ["NUMBA_NUM_THREADS"] == "4"
    assert "NUMBA_NUM_THREADS" not in os.environ
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    with numba_share(16):
        assert os.environ["NUMBA_NUM_THREADS"] == "3"


def test_the_resource_tracker_of_spawned_ranks_keeps_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    with quiet_resource_tracker():
        assert os.environ["PYTHONWARNINGS"] == "ignore:resource_tracker:UserWarning"
    assert "PYTHONWARNINGS" not in os.environ
    monkeypatch.setenv("PYTHONWARNINGS", "error")  # the user's filters are kept, and come back
    with quiet_resource_tracker():
        assert os.environ["PYTHONWARNINGS"] == "error,ignore:resource_tracker:UserWarning"
    assert os.environ["PYTHONWARNINGS"] == "error"


def test_the_command_asks_for_huge_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    from gtool.cli.main import main

    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    main(version=False)
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")
    main(version=False)
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "0"


@pytest.mark.parametrize("blocks", [1, 2, 3, 7, 40])
def test_row_blocks_cover_the_matrix(blocks: int) -> None:
    matrix = sp.random(23, 17, density=0.2, random_state=1, format="csr")
    dense = torch.from_numpy(matrix.toarray())
    pieces = split_rows(torch_csr(matrix, torch.float64), blocks)
    assert pieces[0][0] == 0 and pieces[-1][1] == 23 and len(pieces) <= blocks
    for (lo, hi, block), following in zip(pieces, pieces[1:] + [(23, None, None)], strict=True):
        assert hi == following[0]
        assert torch.equal(block.to_dense(), dense[lo:hi])


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_adam_matches_torch_optim(kind: str) -> None:
    generator = torch.Generator().manual_seed(0)
    start = [torch.randn(5, 3, generator=generator, dtype=torch.float64) for _ in range(2)]
    ours = [p.clone().requires_grad_() for p in start]
    theirs = [p.clone().requires_grad_() for p in start]
    optimizer = Adam([(ours[:1], 0.1), (ours[1:], 0.0)], lr=0.05, decoupled=kind == "adamw")
    reference_kind = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    reference = reference_kind(
        [{"params": theirs[:1], "weight_decay": 0.1}, {"params": theirs[1:], "weight_decay": 0.0}], lr=0.05
    )
    for step in range(4):
        for params in (ours, theirs):
            for i, param in enumerate(params):
                param.grad = torch.sin(param.detach() * (step + i + 1))
        optimizer.step()
        reference.step()
    for got, want in zip(ours, theirs, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)


def test_checkpoint_round_trip_and_refusal(tmp_path) -> None:
    comm = single_rank_comm()
    shape = {"grid": [1, 1, 1], "dims": [4, 3, 2]}
    checkpoints = Checkpoints(str(tmp_path), comm, shape)
    assert checkpoints.latest() is None
    state = {"model": {"weight.0": torch.arange(6.0)}, "optimizer": {"step": torch.tensor(3)}}
    checkpoints.save(3, state, {"best_valid": 0.5})
    checkpoints.save(6, state, {"best_valid": 0.75})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-000006", "latest.json"]
    manifest = checkpoints.latest()
    assert manifest["epoch"] == 6 and manifest["history"] == {"best_valid": 0.75}
    loaded = checkpoints.load(manifest, CPU)
    assert torch.equal(loaded["model"]["weight.0"], state["model"]["weight.0"])
    other = Checkpoints(str(tmp_path), comm, {"grid": [2, 1, 1], "dims": [4, 3, 2]})
    with pytest.raises(CheckpointError, match=r"grid: checkpoint \[1, 1, 1\] vs run \[2, 1, 1\]"):
        other.latest()
    written_before_placements = Checkpoints(str(tmp_path), comm, {**shape, "placement": "zyx"})
    assert written_before_placements.latest()["epoch"] == 6
    placed = Checkpoints(str(tmp_path), comm, {**shape, "placement": "yxz"})
    with pytest.raises(CheckpointError, match="placement: checkpoint zyx vs run yxz"):
        placed.latest()
    written_before_orders = Checkpoints(str(tmp_path), comm, {**shape, "transform_first": [False, False]})
    assert written_before_orders.latest()["epoch"] == 6
    reordered = Checkpoints(str(tmp_path), comm, {**shape, "transform_first": [False, True]})
    with pytest.raises(CheckpointError, match=r"transform_first: checkpoint \[False, False\] vs run"):
        reordered.latest()
    written_before_minibatch = Checkpoints(
        str(tmp_path), comm, {**shape, "batch_size": None, "data_parallel": 1}
    )
    assert written_before_minibatch.latest()["epoch"] == 6
    batched = Checkpoints(str(tmp_path), comm, {**shape, "batch_size": 64, "data_parallel": 2})
    with pytest.raises(CheckpointError, match="batch_size: checkpoint full graph vs run 64, data_parallel: "):
        batched.latest()
    order = {"scheme": "double", "seed": 0}
    assert Checkpoints(str(tmp_path), comm, {**shape, "node_order": order}).latest()["epoch"] == 6  # untold
    Checkpoints(str(tmp_path), comm, {**shape, "node_order": order}).save(7, state, {})
    resharded = Checkpoints(str(tmp_path), comm, {**shape, "node_order": {"scheme": "double", "seed": 1}})
    with pytest.raises(
        CheckpointError, match="node_order: checkpoint --perm double --seed 0 vs run --perm double"
    ):
        resharded.latest()  # learned features, saved by position, would land on other nodes


def test_a_damaged_or_unwritable_rank_file_is_a_checkpoint_error_naming_it(tmp_path, monkeypatch) -> None:
    """A truncated rank file was torch's traceback; a write that failed (a full device) left its temporary
    file behind, which filled the device again on the next try."""
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), {"grid": [1, 1, 1], "dims": [4, 3, 2]})
    state = {"model": {"weight.0": torch.arange(6.0)}}
    checkpoints.save(3, state, {})
    manifest = checkpoints.latest()
    os.truncate(rank_file(manifest["path"], 0), 100)
    with pytest.raises(CheckpointError, match=r"rank-00000.pt: cannot be read \(.*\); the checkpoint is dam"):
        checkpoints.load(manifest, CPU)

    def full_device(state, handle) -> None:
        handle.write(b"part")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_device)
    with pytest.raises(CheckpointError, match="rank-00000.pt: cannot be written .no space left on the dev"):
        checkpoints.save(4, state, {})
    assert [p.name for p in (tmp_path / "epoch-000004").iterdir()] == []
    assert checkpoints.latest()["epoch"] == 3


def test_a_diverged_loss_stops_the_run_before_its_checkpoint(tmp_path, monkeypatch) -> None:
    """A NaN loss (an lr too high) trained on to the end, exit 0, and replaced the last good checkpoint."""
    losses = {1: 1.5, 2: math.nan, 3: math.nan}
    trainer = SimpleNamespace(
        config=TrainConfig.of("s", epochs=3, checkpoint=str(tmp_path), checkpoint_every=1),
        comm=single_rank_comm(),
        train_epoch=lambda epoch: EpochRecord(epoch, losses[epoch], 0.0, 0.0, 0.0, 0.0),
        evaluate=lambda: {"train": 0.5, "valid": 0.5, "test": 0.5},
        state=lambda: {"model": {}},
    )
    monkeypatch.setattr(loop, "checkpoint_shape", lambda trainer: {"grid": [1, 1, 1]})
    with pytest.raises(GtoolError, match="the loss is nan at epoch 2: training diverged"):
        loop.fit(trainer, Reporter(False, None, append=False), CPU)
    assert json.loads((tmp_path / "latest.json").read_text())["epoch"] == 1


def test_checkpoint_and_log_paths_are_checked_before_ranks_start(tmp_path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    for options, message in (
        ({"checkpoint": str(file)}, "file (--checkpoint): not a folder: a file is in the way"),
        ({"log": str(file / "log.jsonl")}, "file (the folder of --log): not a folder"),
        ({"log": str(tmp_path)}, "a folder; name a file for the JSON lines"),
    ):
        with pytest.raises(GtoolError, match=re.escape(message)):
            prepare_run_files(TrainConfig.of("s", **options))
    prepare_run_files(TrainConfig.of("s", checkpoint=str(tmp_path / "ck"), log=str(tmp_path / "a/log")))
    assert (tmp_path / "ck").is_dir() and (tmp_path / "a").is_dir()
    minibatch = TrainConfig.of("s", checkpoint=str(tmp_path / "ck"), batch_size=300, resume=True)
    shape = {**loop.run_shape(minibatch), "dims": [16, 4]}
    Checkpoints(str(tmp_path / "ck"), single_rank_comm(), shape).save(1, {}, {})
    prepare_run_files(minibatch)
    with pytest.raises(GtoolError, match="batch_size: checkpoint 300 vs run full graph"):
        prepare_run_files(minibatch.replace(batch_size=None))
    with pytest.raises(
        GtoolError, match=r"grid: checkpoint \[1, 1, 1\] vs run \[2, 1, 1\], .*data_parallel: "
    ):
        prepare_run_files(minibatch.replace(grid=(2, 1, 1), data_parallel=2))


def test_local_ranks_beyond_the_machines_memory_are_refused_before_any_starts() -> None:
    """`--grid auto --ranks 100000` planned for 100,000 ranks and would have spawned them all."""
    with pytest.raises(GtoolError, match="10000000 local ranks need at least .* GiB .* use a smaller grid"):
        launch_local(10_000_000, print)
    with pytest.raises(GtoolError, match="10000000 local ranks need"):  # before planning for them
        auto_grid(None, 10_000_000, None, print)


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="--layers must be >= 1"):
        TrainConfig.of("s", layers=0)
    with pytest.raises(ValueError, match="--optimizer must be one of"):
        TrainConfig.of("s", algorithm="sgd")
    not_finite = r"--dropout must be a finite number, got inf; --lr must be a finite number, got nan"
    with pytest.raises(ValueError, match=not_finite):  # nan passes every bound; an inf timeout overflowed
        TrainConfig.of("s", lr=float("nan"), dropout=float("inf"))


@pytest.mark.parametrize("content", [b'{"epoch": 3, "pa', b"\xff\xfe", b'["epoch-000003"]'])
def test_a_damaged_latest_json_is_a_checkpoint_error_naming_it(tmp_path, content: bytes) -> None:
    (tmp_path / "latest.json").write_bytes(content)
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), {"grid": [1, 1, 1]})
    with pytest.raises(CheckpointError, match=r"latest.json: .*the checkpoint is damaged"):
        checkpoints.latest()


def test_a_store_without_validation_nodes_is_said_so_not_nan(capsys: pytest.CaptureFixture[str]) -> None:
    """The summary said 'best validation accuracy nan (epoch 1)'."""
    history = History()
    records = [
        EpochRecord(e, 1.0, 0.1, 0.0, 0.0, 0.0, {"train": 0.5, "valid": math.nan, "test": 0.4})
        for e in (1, 2)
    ]
    for record in records:
        history.update(record)
    assert history.best_valid is None
    Reporter(True, None, append=False).summary(Summary(history, records))
    assert "n/a (the store has no validation nodes)" in " ".join(capsys.readouterr().out.split())
    Reporter(True, None, append=False).summary(Summary(History(), []))
    assert "n/a (no evaluation yet)" in " ".join(capsys.readouterr().out.split())
