"""What `gtool train` checks before any rank starts."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from gtool.errors import GtoolError
from gtool.store.metadata import LabelsInfo
from gtool.trainer.checkpoints import folder
from gtool.trainer.checkpoints.files import Checkpoints
from gtool.trainer.checkpoints.folder import run_shape
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit import train
from gtool.trainer.fit.train import prepare_run_files
from tests.support.stores import StoreFactory
from tests.trainer.cases import single_rank_comm
from tests.trainer.checkpoints.test_checkpoint_folder import snapshot
from tests.trainer.checkpoints.test_manifests import GTOOL, MODEL, read_only

STORE_S = SimpleNamespace(num_features=8, num_classes=4, meta=SimpleNamespace(labels=LabelsInfo("given")))
"""What the launcher reads of the store "s" (its widths), without a store."""


def test_checkpoint_and_log_paths_are_checked_before_ranks_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (folder, train):
        monkeypatch.setattr(module, "open_store", lambda location: STORE_S)
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
    shape = {**run_shape(minibatch), "dims": [16, 4]}
    Checkpoints(str(tmp_path / "ck"), single_rank_comm(), shape).save(1, {}, {})
    prepare_run_files(minibatch)
    with pytest.raises(GtoolError, match="batch_size: checkpoint 300 vs run full graph"):
        prepare_run_files(minibatch.replace(batch_size=None))
    with pytest.raises(
        GtoolError, match=r"grid: checkpoint \[1, 1, 1\] vs run \[2, 1, 1\], .*data_parallel: "
    ):
        prepare_run_files(minibatch.replace(grid=(2, 1, 1), data_parallel=2))


@pytest.mark.integration
def test_a_log_that_cannot_be_written_is_one_error_line_before_any_rank_starts(
    stores: StoreFactory, tmp_path: Path
) -> None:
    """`--log` on a read-only device (or in a folder that takes no files, as /proc) was rank 0's OSError
    traceback, after the store was loaded."""
    store = stores("rmat:9:8", tiles=4, num_features=32, num_classes=6)
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("needs mount namespaces (unshare -m) to make a read-only mount")
    (tmp_path / "old.jsonl").write_text('{"epoch": 1}\n')
    before = snapshot(tmp_path)
    for log, why in (("new.jsonl", "read-only file system"), ("old.jsonl", "read-only file system")):
        run = read_only(tmp_path, "train", store, *MODEL, "--log", str(tmp_path / log))
        if "mount: " in run.stderr:
            pytest.skip(f"cannot make a read-only mount here: {run.stderr.strip()}")
        assert run.returncode == 2, run.stderr
        assert run.stderr.splitlines() == [f"error: --log {tmp_path / log}: cannot be written ({why})"]
    assert snapshot(tmp_path) == before
    run = subprocess.run(
        [*GTOOL, "train", store, *MODEL, "--log", "/proc/gtool.jsonl"], capture_output=True, text=True
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        "error: --log /proc/gtool.jsonl: cannot be written (its folder takes no new files)"
    ]
    assert not Path("/proc/gtool.jsonl").exists()


def test_checking_a_new_log_leaves_no_file(tmp_path: Path) -> None:
    prepare_run_files(TrainConfig.of("s", log=str(tmp_path / "a" / "log.jsonl")))
    assert [p.name for p in tmp_path.rglob("*")] == ["a"]
