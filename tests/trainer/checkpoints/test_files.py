"""Checkpoint files: round trips, refusals, damage named."""

from __future__ import annotations

import errno
import json
import os

import pytest
import torch

from gtool.errors import GtoolError
from gtool.trainer.checkpoints import files
from gtool.trainer.checkpoints.files import Checkpoints, read_rank_file
from gtool.trainer.checkpoints.folder import BEST, CheckpointError, latest_manifest, rank_file
from gtool.trainer.predict.job import model_manifest
from tests.trainer.cases import single_rank_comm

CPU = torch.device("cpu")


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


@pytest.mark.parametrize("content", [b'{"epoch": 3, "pa', b"\xff\xfe", b'["epoch-000003"]'])
def test_a_damaged_latest_json_is_a_checkpoint_error_naming_it(tmp_path, content: bytes) -> None:
    (tmp_path / "latest.json").write_bytes(content)
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), {"grid": [1, 1, 1]})
    with pytest.raises(CheckpointError, match=r"latest.json: .*the checkpoint is damaged"):
        checkpoints.latest()


def test_resuming_needs_each_ranks_file_of_the_epoch_rank_0_read(tmp_path) -> None:
    """Ranks used to resume from whatever their own folder held: node 1 restarted at epoch 1 with fresh
    weights while node 0 resumed at epoch 11. A rank file of another epoch (left by another run in a folder
    that is not shared, say) is refused naming the rank."""
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), {"grid": [1, 1, 1], "dims": [4, 3, 2]})
    assert checkpoints.resume_point(CPU) is None
    checkpoints.save(3, {"model": {"weight.0": torch.zeros(2)}}, {})
    stale = rank_file(tmp_path / "epoch-000003", 0).read_bytes()
    checkpoints.save(6, {"model": {"weight.0": torch.ones(2)}}, {})
    manifest, state = checkpoints.resume_point(CPU)
    assert (
        manifest["epoch"] == 6
        and state["epoch"] == 6
        and torch.equal(state["model"]["weight.0"], torch.ones(2))
    )
    rank_file(tmp_path / "epoch-000006", 0).write_bytes(stale)
    with pytest.raises(
        CheckpointError,
        match=r"--resume: rank 0 \(on host .*\) cannot resume from epoch 6, .*rank-00000.pt is of epoch 3",
    ):
        checkpoints.resume_point(CPU)


def test_the_best_models_copy_is_kept_beside_the_latest(tmp_path) -> None:
    """Checkpoints kept only the last epoch: predict gave another accuracy than the summary's best epoch."""
    shape = {"grid": [1, 1, 1], "dims": [4, 3, 2], "num_nodes": 5}
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), shape, {"layers": 2})

    def parts(value: float) -> dict:
        return {"model": {"weight.0": torch.full((2,), value)}}

    checkpoints.save(3, parts(3), {}, best=(2, parts(2)))
    checkpoints.save(6, parts(6), {}, best=(2, parts(2)))  # no better epoch: the copy stays
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best-000002",
        "best.json",
        "epoch-000006",
        "latest.json",
    ]
    best = latest_manifest(tmp_path, pointer=BEST)
    assert best["epoch"] == 2 and best["model"] == {"layers": 2} and best["shape"] == shape
    assert torch.equal(read_rank_file(best["path"], 0, CPU)["model"]["weight.0"], torch.full((2,), 2.0))
    assert model_manifest(str(tmp_path))["path"] == best["path"]
    assert model_manifest(str(tmp_path), "latest")["epoch"] == 6
    checkpoints.save(9, parts(9), {}, best=(8, parts(8)))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best-000008",
        "best.json",
        "epoch-000009",
        "latest.json",
    ]
    resumed = Checkpoints(str(tmp_path), single_rank_comm(), shape, {"layers": 2})
    resumed.resume_point(CPU)
    assert resumed.best_epoch == 8
    with pytest.raises(GtoolError, match="--use must be one of best, latest, got 'last'"):
        model_manifest(str(tmp_path), "last")


def test_checkpoints_without_a_best_copy_predict_from_the_latest(tmp_path) -> None:
    """Folders written before best copies (or by a run without validation nodes) keep working."""
    shape = {"grid": [1, 1, 1], "dims": [4, 3, 2], "num_nodes": 5}
    Checkpoints(str(tmp_path), single_rank_comm(), shape, {"layers": 2}).save(4, {"model": {}}, {})
    assert not (tmp_path / BEST).exists()
    manifest = model_manifest(str(tmp_path))
    assert manifest["epoch"] == 4 and manifest["use"] == "latest"


def test_a_checkpoint_whose_rank_files_rank_0_cannot_see_is_refused_when_written(
    tmp_path, monkeypatch
) -> None:
    """A checkpoint folder on each node took every rank's file and rank 0 moved latest.json: the split
    checkpoint was found only when resuming (node 1 restarted from epoch 1)."""
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), {"grid": [1, 1, 1], "dims": [4, 3, 2]})
    checkpoints.save(3, {"model": {}}, {})
    monkeypatch.setattr(
        files, "write_atomically", lambda path, write: None
    )  # written where rank 0 cannot see
    with pytest.raises(
        CheckpointError, match=r"epoch-000006: rank-00000.pt missing as rank 0 sees the folder"
    ):
        checkpoints.save(6, {"model": {}}, {})
    assert json.loads((tmp_path / "latest.json").read_text())["epoch"] == 3
