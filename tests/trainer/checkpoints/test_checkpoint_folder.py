"""A checkpoint folder belongs to one run: another run's checkpoint is refused or replaced on request, and
two runs never write one folder at once."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch
import zarr

from gtool.errors import GtoolError, StoreExistsError, Terminated
from gtool.store.writing.staging import PREDICT_OUTPUT, check_output
from gtool.trainer.checkpoints.files import Checkpoints
from gtool.trainer.checkpoints.folder import claim_folder, write_atomically
from tests.support.stores import StoreFactory
from tests.trainer.cases import single_rank_comm
from tests.trainer.test_cli_train import MODEL, gtool_train, start_gtool_train, wait_for


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("rmat:9:8", tiles=4, num_features=32, num_classes=6)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.integration
def test_another_runs_checkpoint_is_refused_unless_resumed_or_overwritten(store: str, tmp_path: Path) -> None:
    """A second `gtool train --checkpoint` without --resume used to replace the first run's checkpoint
    without a word."""
    ck = tmp_path / "ck"
    first = gtool_train(store, *MODEL, "--epochs", "2", "--checkpoint", str(ck))
    assert first.returncode == 0, first.stderr
    before = snapshot(tmp_path)
    other = ["--layers", "3", "--hidden", "8", "--epochs", "1", "--checkpoint", str(ck)]
    refused = gtool_train(store, *other)
    assert refused.returncode == 2, refused.stderr
    assert error_lines(refused.stderr) == [
        f"error: --checkpoint {ck} holds the checkpoint of another run (epoch 2); pass --resume to continue "
        "it, --overwrite to replace it, or name another folder"
    ]
    assert snapshot(tmp_path) == before
    replaced = gtool_train(store, *other, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    latest = json.loads((ck / "latest.json").read_text())
    assert latest["epoch"] == 1 and sorted(p.name for p in ck.iterdir()) == [
        "best-000001",
        "best.json",
        "epoch-000001",
        "latest.json",
    ]
    assert json.loads((ck / latest["path"] / "manifest.json").read_text())["model"]["layers"] == 3


@pytest.mark.integration
def test_a_second_run_on_a_checkpoint_folder_in_use_is_refused(store: str, tmp_path: Path) -> None:
    """Two runs on one folder used to both write it: one run's work lost, or a FileNotFoundError."""
    ck = tmp_path / "ck"
    run = start_gtool_train(store, *MODEL, "--epochs", "100000", "--checkpoint", str(ck))
    try:
        wait_for(lambda: (ck / "latest.json").exists(), "the first run's first checkpoint")
        second = gtool_train(store, *MODEL, "--epochs", "2", "--checkpoint", str(ck), "--resume")
        assert second.returncode == 2, second.stderr
        [line] = error_lines(second.stderr)
        assert line.startswith(f"error: {ck}: another gtool train run is writing this output (pid {run.pid} ")
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()


@pytest.mark.integration
def test_folders_of_the_user_in_a_checkpoint_folder_are_kept(store: str, tmp_path: Path) -> None:
    """Every folder named `epoch-*` or `best-*` was taken for a checkpoint and removed: `--checkpoint
    ~/project` deleted `~/project/best-practices` and all it held."""
    for name in ("best-practices", "epoch-notes", "best-0001"):
        (tmp_path / "ck" / name).mkdir(parents=True)
        (tmp_path / "ck" / name / "notes.txt").write_text(name)
    kept = snapshot(tmp_path / "ck")
    run = gtool_train(
        store, *MODEL, "--epochs", "2", "--checkpoint-every", "1", "--checkpoint", str(tmp_path / "ck")
    )
    assert run.returncode == 0, run.stderr
    latest = json.loads((tmp_path / "ck" / "latest.json").read_text())["path"]
    best = json.loads((tmp_path / "ck" / "best.json").read_text())["path"]
    assert {p.name for p in (tmp_path / "ck").iterdir()} == {
        "best-0001",
        "best-practices",
        "epoch-notes",
        "best.json",
        "latest.json",
        latest,
        best,
    }
    after = snapshot(tmp_path / "ck")
    assert {name: after[name] for name in kept} == kept


@pytest.mark.integration
@pytest.mark.parametrize("inside", ["ck", ".", "adj/ck"])
def test_a_checkpoint_folder_in_the_store_is_refused_before_any_rank_starts(
    store: str, tmp_path: Path, inside: str
) -> None:
    """`--checkpoint STORE/ck` (or the store itself) used to write the checkpoint into the store: files zarr
    does not know, and `--overwrite` would remove epoch folders among its arrays."""
    copy = tmp_path / "s.zarr"
    shutil.copytree(store, copy)
    before = snapshot(tmp_path)
    ck = copy / inside if inside != "." else copy
    refused = gtool_train(str(copy), *MODEL, "--epochs", "1", "--checkpoint", str(ck), "--overwrite")
    assert refused.returncode == 2, refused.stderr
    where = "the store" if inside == "." else f"inside the store {copy}"
    assert error_lines(refused.stderr) == [
        f"error: --checkpoint {ck}: {where} (the run's files would change it); name a place outside it"
    ]
    assert snapshot(tmp_path) == before


@pytest.mark.integration
def test_a_log_in_the_store_is_refused(store: str, tmp_path: Path) -> None:
    """`--log STORE/log.jsonl` used to add a file zarr does not know to the store."""
    copy = tmp_path / "s.zarr"
    shutil.copytree(store, copy)
    before = snapshot(tmp_path)
    refused = gtool_train(str(copy), *MODEL, "--epochs", "1", "--log", str(copy / "log.jsonl"))
    assert refused.returncode == 2, refused.stderr
    assert error_lines(refused.stderr) == [
        f"error: --log {copy / 'log.jsonl'}: inside the store {copy} (the run's files would change it); "
        "name a place outside it"
    ]
    assert snapshot(tmp_path) == before


def test_claiming_a_folder_removes_only_what_no_complete_checkpoint_uses(tmp_path: Path) -> None:
    """Folders of checkpoints a killed run never completed are removed (a new run would write into them);
    with --overwrite, every checkpoint of the other run; files that are not checkpoints stay."""
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), {"grid": [1, 1, 1], "dims": [4, 3, 2]})
    checkpoints.save(3, {"model": {"weight.0": torch.ones(2)}}, {})
    (tmp_path / "epoch-000006").mkdir()
    (tmp_path / "epoch-000006" / "rank-00007.pt").write_bytes(b"of a killed run")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(GtoolError, match="holds the checkpoint of another run .epoch 3."):
        claim_folder(tmp_path, resume=False, overwrite=False)
    assert (tmp_path / "epoch-000006").exists()
    claim_folder(tmp_path, resume=True, overwrite=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-000003", "latest.json", "notes.txt"]
    claim_folder(tmp_path, resume=False, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.integration
def test_a_store_or_a_prediction_is_refused_as_a_checkpoint_folder(store: str, tmp_path: Path) -> None:
    """`--checkpoint DIR` of a predict output or another graph store wrote the checkpoint inside it; a later
    `gtool predict -o DIR --overwrite` deleted the model with the output."""
    prediction = tmp_path / "out.zarr"
    zarr.open_group(str(prediction), mode="w").attrs["gtool_predictions"] = {"logits": True}
    other_store = tmp_path / "other.zarr"
    shutil.copytree(store, other_store)
    for folder in (prediction, other_store):
        before = snapshot(tmp_path)
        refused = gtool_train(store, *MODEL, "--epochs", "1", "--checkpoint", str(folder))
        assert refused.returncode == 2, refused.stderr
        assert error_lines(refused.stderr) == [
            f"error: --checkpoint {folder}: a Zarr store or prediction output (zarr.json there), not a "
            "checkpoint folder; name another folder"
        ]
        assert snapshot(tmp_path) == before


def test_overwrite_keeps_a_prediction_holding_a_checkpoint(tmp_path: Path) -> None:
    """A prediction output in which an older gtool wrote a checkpoint is not only the output: --overwrite
    does not remove it."""
    prediction = tmp_path / "out.zarr"
    zarr.open_group(str(prediction), mode="w").attrs["gtool_predictions"] = {"logits": True}
    check_output(str(prediction), True, PREDICT_OUTPUT)  # the output alone is replaced
    (prediction / "latest.json").write_text('{"epoch": 1, "path": "epoch-000001"}')
    with pytest.raises(StoreExistsError, match="is neither a gtool predict output nor an empty folder"):
        check_output(str(prediction), True, PREDICT_OUTPUT)


def test_a_users_folder_named_like_a_checkpoints_is_refused_not_removed(tmp_path: Path) -> None:
    """A new --checkpoint folder holding the user's own `epoch-000001/` (no manifest) had it deleted."""
    (tmp_path / "epoch-000001").mkdir()
    (tmp_path / "epoch-000001" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    for resume, overwrite in ((False, False), (True, False), (False, True)):
        with pytest.raises(
            GtoolError,
            match=r"epoch-000001 holds files gtool does not write \(notes.txt\), and a run replaces folders "
            "of that name; move it away or name another folder",
        ):
            claim_folder(tmp_path, resume, overwrite)
        assert snapshot(tmp_path) == before


def test_resuming_with_a_lost_best_copy_is_refused(tmp_path: Path) -> None:
    """Resuming after best-* was deleted exited 0, its summary named a best epoch and best.json pointed at
    nothing (gtool predict kept failing)."""
    checkpoints = Checkpoints(str(tmp_path), single_rank_comm(), {"grid": [1, 1, 1], "dims": [4, 3, 2]})
    checkpoints.save(2, {"model": {"weight.0": torch.ones(2)}}, {}, best=(2, {"weight.0": torch.ones(2)}))
    claim_folder(tmp_path, resume=True, overwrite=False)
    shutil.rmtree(tmp_path / "best-000002")
    before = snapshot(tmp_path)
    with pytest.raises(GtoolError) as refused:
        claim_folder(tmp_path, resume=True, overwrite=False)
    assert str(refused.value) == (
        f"--resume: {tmp_path / 'best-000002'}: the checkpoint's folder is missing (removed?); remove "
        f"{tmp_path / 'best.json'} to resume without the best model's copy (the next best epoch writes one)"
    )
    assert snapshot(tmp_path) == before


def test_a_signal_while_a_pointer_is_written_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A SIGHUP that landed while a checkpoint was written left `.latest.json.PID.tmp` for good."""

    def hung_up(handle) -> None:
        handle.write(b'{"epoch"')
        raise Terminated("hung up", signal.SIGHUP)

    with pytest.raises(Terminated):
        write_atomically(tmp_path / "latest.json", hung_up)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / ".latest.json.4242.tmp").write_text("of a killed run")  # SIGKILL: nothing could unwind
    (tmp_path / ".notes.4242.tmp").write_text("mine")
    claim_folder(tmp_path, resume=True, overwrite=False)
    assert [p.name for p in tmp_path.iterdir()] == [".notes.4242.tmp"]
