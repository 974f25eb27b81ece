"""One writer per output, what --overwrite may replace, and runs that end by a signal or a full disk."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import zarr
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.errors import GtoolError, StoreExistsError
from gtool.preprocess import pipeline
from gtool.store.reader import open_store
from gtool.store.verify import verify_store
from gtool.store.writing.output_lock import OutputLock
from gtool.store.writing.staging import StagedOutput
from tests.support.shard_runs import LOCKED, leftovers, start_shard
from tests.support.stores import make_store


def fake_store(path: Path) -> Path:
    """A folder that looks like a gtool store to --overwrite (a group with gtool's metadata)."""
    zarr.open_group(str(path), mode="w").attrs["gtool"] = {"layout": 1, "complete": True}
    return path


def shard_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["shard", *args, "-q"], env={"COLUMNS": "300"})
    return result.exit_code, result.output


def test_shard_on_a_locked_output_exits_2_before_any_work(tmp_path: Path) -> None:
    out = fake_store(tmp_path / "s.zarr")
    with OutputLock(out):
        code, output = shard_cli("grid:3x3", "-o", str(out), "--overwrite")
    assert code == 2 and f"error: {out}: {LOCKED}" in output and "Traceback" not in output
    assert zarr.open_group(str(out), mode="r").attrs["gtool"] == {"layout": 1, "complete": True}
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_overwrite_refuses_what_is_not_a_gtool_store(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "precious"
    if kind == "file":
        out.write_text("data")
    else:
        out.mkdir()
        (out / "thesis.tex").write_text("data")
    code, output = shard_cli("grid:3x3", "-o", str(out), "--overwrite")
    assert code == 2
    assert (
        "exists and is neither a gtool store nor an empty folder: --overwrite replaces only those" in output
    )
    assert (
        out.exists() and (out.read_text() if kind == "file" else (out / "thesis.tex").read_text()) == "data"
    )
    assert leftovers(tmp_path) == []


def test_overwrite_accepts_a_gtool_store_and_an_empty_folder(tmp_path: Path) -> None:
    StagedOutput(str(fake_store(tmp_path / "s.zarr")), overwrite=True)
    (tmp_path / "empty").mkdir()
    StagedOutput(str(tmp_path / "empty"), overwrite=True)
    with pytest.raises(StoreExistsError, match="pass --overwrite"):
        StagedOutput(str(tmp_path / "s.zarr"), overwrite=False)


@pytest.mark.parametrize("output", [".", ".."])
def test_output_holding_the_current_folder_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("data")
    monkeypatch.chdir(work)
    code, text = shard_cli("rmat:30", "-o", output, "--overwrite")  # rmat:30 would take hours
    named = os.path.abspath(output)  # resolved before the run starts (workers elsewhere share no cwd)
    assert code == 2 and f"error: -o {named}: the output would hold the current folder" in text
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt"]


def test_publishing_never_replaces_a_store_the_run_did_not_start_from(tmp_path: Path) -> None:
    staged = StagedOutput(str(tmp_path / "s.zarr"), overwrite=False)
    fake_store(Path(staged.path))
    fake_store(tmp_path / "s.zarr")  # written by another program meanwhile
    marker = tmp_path / "s.zarr" / "theirs"
    marker.write_text("theirs")
    with pytest.raises(GtoolError, match="s.zarr was created, replaced or removed by another program"):
        staged.publish()
    assert marker.read_text() == "theirs"


def test_a_leftover_old_store_is_removed_or_put_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """kill -9 during publishing can leave .NAME.old: removed when the store is in place, put back when the
    kill came between the two renames (the store itself was moved away)."""
    fake_store(tmp_path / "s.zarr")
    fake_store(tmp_path / ".s.zarr.old")
    StagedOutput(str(tmp_path / "s.zarr"), overwrite=True)
    assert leftovers(tmp_path) == []
    (tmp_path / "s.zarr").rename(tmp_path / ".s.zarr.old")
    with caplog.at_level("WARNING", logger="gtool"), pytest.raises(StoreExistsError):
        StagedOutput(str(tmp_path / "s.zarr"), overwrite=False)
    assert (tmp_path / "s.zarr" / "zarr.json").exists() and leftovers(tmp_path) == []
    assert "put back the store a killed run had moved to" in caplog.text


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, "No space left on device", "x/c.0"),
        OSError(errno.EROFS, "Read-only file system", "x/.s.zarr.lock"),
        OSError("16384 requested and 4080 written"),
        OSError("Not enough free space to write 16777216 bytes after offset 128"),
    ],
    ids=["disk-full", "read-only", "short-write", "tofile-no-room"],
)
def test_storage_failures_are_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: OSError
) -> None:
    out = fake_store(tmp_path / "s.zarr")

    def fails(*args: object) -> None:
        raise failure

    monkeypatch.setattr(pipeline, "resolve_source", fails)
    code, output = shard_cli("grid:3x3", "-o", str(out), "--overwrite")
    assert code == 2 and "Traceback" not in output
    why = {errno.ENOSPC: "no space left on the device", errno.EROFS: "read-only file system"}
    where = failure.filename or f"{tmp_path} (the output's folder, "
    assert f"error: {where}" in output
    assert f"{why.get(failure.errno, 'a short write')}" in output
    assert f"nothing was published to {out}" in output
    assert zarr.open_group(str(out), mode="r").attrs["gtool"] == {"layout": 1, "complete": True}
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("where", "what"), [("--spill-dir", "given by --spill-dir"), ("-o", "the output's folder")]
)
def test_a_file_in_the_way_of_a_folder_is_one_error_line(tmp_path: Path, where: str, what: str) -> None:
    folder = tmp_path / "f"
    folder.write_text("")
    options = ["-o", str(folder / "s.zarr")] if where == "-o" else ["--spill-dir", str(folder)]
    code, output = shard_cli("grid:3x3", "-o", str(tmp_path / "s.zarr"), *options)
    assert code == 2
    assert output.strip() == f"error: {folder} ({what}): not a folder: a file is in the way (there, or above)"
    assert leftovers(tmp_path) == []


@pytest.mark.integration
def test_a_disk_full_while_writing_tiles_keeps_the_old_store(tmp_path: Path, monkeypatch) -> None:
    path = make_store("grid:4x4", tmp_path / "s.zarr", tiles=2)

    def full(batch, plan):
        raise OSError(errno.ENOSPC, "No space left on device", "adj/0/0_0/row/c.0")

    monkeypatch.setattr(pipeline, "write_tiles", full)
    with pytest.raises(GtoolError, match="adj/0/0_0/row/c.0: no space left on the device"):
        make_store("grid:6x6", tmp_path / "s.zarr", tiles=2, overwrite=True)
    assert open_store(path).num_nodes == 16
    assert leftovers(tmp_path) == []


@pytest.mark.integration
@pytest.mark.parametrize(
    ("sent", "status", "said"),
    [
        (signal.SIGTERM, 143, "terminated"),
        (signal.SIGINT, 130, "interrupted"),
        (signal.SIGHUP, 129, "hung up"),
    ],
)
def test_a_signalled_run_removes_what_it_wrote(tmp_path: Path, sent: int, status: int, said: str) -> None:
    """Signalled once its partial store exists. On a loaded machine the run may complete its work before
    the signal lands: it then exits 0 saying so, with its store published, and the test tries again."""
    for attempt in range(3):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        proc = start_shard(folder / "s.zarr", "rmat:18:8")
        deadline = time.time() + 60
        while not (folder / ".s.zarr.partial" / "zarr.json").exists() and time.time() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be signalled"
        proc.send_signal(sent)
        _, stderr = proc.communicate(timeout=60)
        if proc.returncode == 0 and "came after the store" in stderr:
            assert verify_store(open_store(folder / "s.zarr")).ok
            continue
        assert proc.returncode == status and said in stderr and "Traceback" not in stderr, stderr
        assert sorted(p.name for p in folder.iterdir()) == []  # no store, partial, spill folder or lock
        return
    pytest.fail("every run completed its work before the signal landed")


def _group(leader: int) -> list[psutil.Process]:
    """The live processes of the process group that `leader` leads."""
    alive = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if os.getpgid(process.pid) == leader and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


@pytest.mark.integration
@pytest.mark.parametrize(
    ("sent", "said"),
    [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted"), (signal.SIGHUP, "hung up")],
)
def test_a_signal_to_the_whole_process_group_ends_the_workers_quietly(
    tmp_path: Path, sent: int, said: str
) -> None:
    """`kill -TERM -- -PGID` (a terminal's Ctrl-C too) reaches the Dask worker processes the run forked as
    well: they leave it to the run, which stops them, says its one line and removes what it wrote (each
    worker raised the run's Terminated inside Dask's process bootstrap and printed its traceback)."""
    for attempt in range(3):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        proc = start_shard(folder / "s.zarr", "rmat:18:8", workers=2, own_group=True)
        deadline = time.time() + 60
        while time.time() < deadline and not (
            (folder / ".s.zarr.partial" / "zarr.json").exists() and len(_group(proc.pid)) >= 3
        ):
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be signalled"
        os.killpg(proc.pid, sent)
        _, stderr = proc.communicate(timeout=60)
        if proc.returncode == 0 and "came after the store" in stderr:
            continue
        assert proc.returncode == 128 + sent and stderr.strip() == said, stderr
        assert sorted(p.name for p in folder.iterdir()) == []  # no store, partial, spill folder or lock
        deadline = time.time() + 10
        while _group(proc.pid) and time.time() < deadline:
            time.sleep(0.1)
        assert _group(proc.pid) == []
        return
    pytest.fail("every run completed its work before the signal landed")


@pytest.mark.integration
def test_two_runs_on_one_output_one_wins_the_other_is_told(tmp_path: Path) -> None:
    """Started a random fraction of a second apart: exactly one writes a store that verifies; the other
    exits 2 naming the run that holds the output, and removes nothing of it."""
    rng = np.random.default_rng(21)
    for round_ in range(2):
        out = tmp_path / f"r{round_}" / "s.zarr"
        out.parent.mkdir()
        first = start_shard(out)
        time.sleep(float(rng.uniform(0, 0.5)))
        second = start_shard(out)
        results = [(p.wait(timeout=120), p.stderr.read()) for p in (first, second)]
        assert sorted(code for code, _ in results) == [0, 2], results
        loser = next(text for code, text in results if code == 2)
        assert f"error: {out}: {LOCKED} (pid " in loser.replace("\n", "")
        assert verify_store(open_store(str(out))).ok
        assert leftovers(out.parent) == []
