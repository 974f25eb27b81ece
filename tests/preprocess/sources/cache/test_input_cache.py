"""The input cache: a deflated papers100M-layout input is extracted once, in parallel; a second shard
decompresses nothing and stores the same bytes; budgets, disk space and a writable folder are checked
before any work; a damaged copy is made again; `gtool cache` touches only gtool's copies; a copy is named
by what `gtool cache --help` says."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.errors import GtoolError, InputError
from gtool.preprocess import pipeline
from gtool.preprocess.options import ShardOptions
from gtool.preprocess.sources.cache import entries, extraction
from gtool.preprocess.sources.cache.record import Preparation, watching
from gtool.preprocess.sources.fileinfo import MIB
from gtool.preprocess.sources.npzmember import NpzMember
from tests.preprocess.sources.ogb.test_ogb import write_binary
from tests.preprocess.test_pipeline_determinism import stored_files


def no_decompression(*args, **kwargs):
    raise AssertionError("a compressed member was decompressed")


@pytest.fixture
def papers(tmp_path: Path) -> Path:
    """A deflated papers100M-layout dataset (np.savez_compressed, as ogb writes raw/data.npz)."""
    folder = tmp_path / "ogbn_papers100M"
    write_binary(folder, compressed=True)
    return folder


def run(source: Path, store: Path, **options) -> pipeline.ShardSummary:
    return pipeline.shard(str(source), str(store), ShardOptions(tiles=3, workers=1, **options))


@pytest.mark.integration
def test_second_shard_decompresses_nothing_and_stores_the_same(
    papers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = run(papers, tmp_path / "a.zarr", cache_dir=str(cache))
    assert first.prepared is not None
    assert sorted(first.prepared.extracted) == sorted(
        f"{papers}/raw/{name}"
        for name in ("data.npz[edge_index]", "data.npz[node_feat]", "node-label.npz[node_label]")
    )
    assert [e.state for e in entries.list_entries(cache)] == ["current"] * 3
    monkeypatch.setattr(NpzMember, "pieces", no_decompression)
    streamed, iter_flat = [], NpzMember.iter_flat

    def counted(self: NpzMember, chunk_elems: int):
        streamed.append(self.key)
        return iter_flat(self, chunk_elems)

    monkeypatch.setattr(NpzMember, "iter_flat", counted)
    second = run(papers, tmp_path / "b.zarr", cache_dir=str(cache))
    assert second.prepared is not None and not second.prepared.extracted and len(second.prepared.reused) == 3
    assert second.prepared.reused_bytes == first.prepared.extracted_bytes
    assert sorted(streamed) == ["num_edges_list", "num_nodes_list"]  # one number each, read from the zip
    assert stored_files(str(tmp_path / "a.zarr")) == stored_files(str(tmp_path / "b.zarr"))
    monkeypatch.undo()
    run(papers, tmp_path / "c.zarr", no_cache=True)
    assert stored_files(str(tmp_path / "a.zarr")) == stored_files(str(tmp_path / "c.zarr"))
    assert len(entries.list_entries(cache)) == 3


@pytest.mark.integration
def test_members_are_extracted_side_by_side(
    papers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    active, most = set(), []
    extract = NpzMember.extract

    def watched(self: NpzMember, dest: str, done=None, before_rename=None) -> str:
        active.add(self.key)
        most.append(len(active))
        time.sleep(0.2)
        try:
            return extract(self, dest, done, before_rename)
        finally:
            active.discard(self.key)

    monkeypatch.setattr(NpzMember, "extract", watched)
    monkeypatch.setattr(extraction, "available_cores", lambda: 4)
    run(papers, tmp_path / "s.zarr", cache_dir=str(tmp_path / "cache"))
    assert max(most) == 3


def test_too_small_budget_is_refused_before_extraction_or_cluster(
    papers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(NpzMember, "pieces", no_decompression)
    monkeypatch.setattr(pipeline, "stage_engine", no_decompression)
    cache = tmp_path / "cache"
    with pytest.raises(GtoolError, match=r"--memory-limit 64.0 MiB is too small for 64 nodes with 1 workers"):
        run(papers, tmp_path / "s.zarr", cache_dir=str(cache), memory_limit=64 << 20)
    assert not cache.exists() and not (tmp_path / "s.zarr").exists()
    result = CliRunner().invoke(
        app, ["shard", str(papers), "--memory-limit", "300MB", "-w", "2", "--cache-dir", str(cache), "-q"]
    )
    assert result.exit_code == 2 and "is too small for 64 nodes with 2 workers" in result.output


def test_no_room_for_the_copies_is_refused_before_extraction(
    papers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entries, "free_bytes", lambda folder: 1000)
    monkeypatch.setattr(NpzMember, "pieces", no_decompression)
    cache = tmp_path / "cache"
    size = r"[1-9][0-9.]* [KM]?i?B"  # in the unit that fits it (it read '0.00 GiB')
    needs = rf"{cache} \(given by --cache-dir\): extracting .* needs {size} there, which has 1000 B free"
    with pytest.raises(GtoolError, match=needs):
        run(papers, tmp_path / "s.zarr", cache_dir=str(cache))
    assert entries.list_entries(cache) == [] and not (tmp_path / "s.zarr").exists()


@pytest.mark.integration
def test_cache_list_and_clear(papers: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(papers, tmp_path / "s.zarr", cache_dir=str(cache))
    (cache / "data.npz.0123456789abcdef.x.npy.partial-999999999").write_bytes(b"cut")

    def cli(*args: str) -> str:
        result = CliRunner().invoke(app, ["cache", *args, "--cache-dir", str(cache)], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        return result.output

    listed = cli("list")
    assert listed.count("current") == 3 and "partial" in listed and str(papers / "raw") in listed
    data = papers / "raw" / "data.npz"
    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))
    assert cli("list").count("stale") == 2
    assert "removed 3 copies" in cli("clear", "--stale")
    assert [e.state for e in entries.list_entries(cache)] == ["current"]
    assert "removed 1 copies" in cli("clear")
    assert list(cache.iterdir()) == []


def test_a_copy_is_named_by_the_inputs_size_modification_time_and_first_and_last_mib(tmp_path: Path) -> None:
    """What `gtool cache --help` says the fingerprint hashes, and nothing else."""
    path = tmp_path / "edges.txt.gz"
    stamp = path.parent.stat().st_mtime_ns

    def copy_name(content: bytes, mtime_ns: int = stamp) -> str:
        path.write_bytes(content)
        os.utime(path, ns=(mtime_ns, mtime_ns))
        return entries.work_copy_path(str(tmp_path / "cache"), str(path), ".txt")

    content = bytes(3 * MIB)
    name = copy_name(content)
    assert copy_name(content[: MIB + 5] + b"x" + content[MIB + 6 :]) == name
    for changed in (b"x" + content[1:], content[:-1] + b"x", content + b"x"):
        assert copy_name(changed) != name
    assert copy_name(content, stamp + 1) != name
    help_text = " ".join(CliRunner().invoke(app, ["cache", "--help"]).output.split())  # as one line
    assert "a hash of its size, modification time and first and last MiB" in help_text


def test_a_corrupt_member_fails_naming_it_and_leaves_no_copy(papers: Path, tmp_path: Path) -> None:
    data = papers / "raw" / "data.npz"
    with np.load(data) as arrays:
        members = {key: arrays[key] for key in arrays.files}
    members["node_feat"] = np.random.default_rng(0).random((members["node_feat"].shape[0], 4096), np.float32)
    np.savez_compressed(data, **members)
    member = NpzMember(str(data), "node_feat")
    start = member.payload_offset() + member.info.compress_size // 2
    raw = bytearray(data.read_bytes())
    raw[start : start + 64] = bytes(64)
    data.write_bytes(bytes(raw))
    cache = tmp_path / "cache"
    with pytest.raises(InputError, match=r"data.npz\[node_feat\]: corrupt or truncated compressed data"):
        run(papers, tmp_path / "s.zarr", cache_dir=str(cache))
    assert not any("node_feat" in p.name or ".partial-" in p.name for p in cache.iterdir())


def cache_cli(cache: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["cache", *args, "--cache-dir", str(cache)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.integration
def test_cache_commands_leave_files_that_are_not_copies_alone(papers: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    theirs = {"notes.txt": b"hi", "cfg.source.json": b"{}", "x.0123456789abcdef.csv": b"1,2"}
    for name, data in theirs.items():
        (cache / name).write_bytes(data)
    run(papers, tmp_path / "s.zarr", cache_dir=str(cache))
    listed = cache_cli(cache, "list")
    assert "3 copies" in listed and "3 other file(s)" in listed and "notes.txt" not in listed
    cache_cli(cache, "clear", "--stale")
    assert "removed 3 copies" in cache_cli(cache, "clear")
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == theirs


def gzipped_edges(tmp_path: Path) -> Path:
    edges = np.random.default_rng(0).integers(0, 500, size=(2000, 2))
    path = tmp_path / "edges.txt.gz"
    with gzip.open(path, "wt") as f:
        np.savetxt(f, edges, fmt="%d")
    return path


def input_edges(source: Path, store: Path, cache: Path) -> int:
    return run(source, store, cache_dir=str(cache), num_nodes=500).input_edges


@pytest.mark.integration
def test_a_damaged_copy_is_made_again(papers: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    edges = gzipped_edges(tmp_path)
    assert input_edges(edges, tmp_path / "a.zarr", cache) == 2000
    (plain,) = cache.glob("*.plain")
    text = plain.read_bytes()
    plain.write_bytes(text[: text.rfind(b"\n", 0, len(text) // 2) + 1])
    assert [e.state for e in entries.list_entries(cache)] == ["damaged"]
    assert input_edges(edges, tmp_path / "b.zarr", cache) == 2000
    assert plain.read_bytes() == text and [e.state for e in entries.list_entries(cache)] == ["current"]

    first = run(papers, tmp_path / "c.zarr", cache_dir=str(cache))
    (labels,) = cache.glob("node-label.npz.*.node_label.npy")
    with open(labels, "r+b") as f:
        f.write(b"garbage!")
    second = run(papers, tmp_path / "d.zarr", cache_dir=str(cache))
    assert second.prepared is not None and second.prepared.extracted == [
        f"{papers}/raw/node-label.npz[node_label]"
    ]
    assert first.prepared is not None and len(first.prepared.extracted) == 3
    assert stored_files(str(tmp_path / "c.zarr")) == stored_files(str(tmp_path / "d.zarr"))


@pytest.mark.integration
def test_a_moved_input_renews_the_notes_of_the_copies_it_reuses(papers: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(papers, tmp_path / "a.zarr", cache_dir=str(cache))
    moved = tmp_path / "elsewhere" / papers.name
    moved.parent.mkdir()
    papers.rename(moved)
    assert [e.state for e in entries.list_entries(cache)] == ["stale"] * 3
    second = run(moved, tmp_path / "b.zarr", cache_dir=str(cache))
    assert second.prepared is not None and len(second.prepared.reused) == 3
    assert [e.state for e in entries.list_entries(cache)] == ["current"] * 3
    assert {e.source for e in entries.list_entries(cache)} == {
        str(moved / "raw" / name) for name in ("data.npz", "node-label.npz")
    }
    assert "removed 0 copies" in cache_cli(cache, "clear", "--stale")


@pytest.mark.parametrize(
    ("where", "problem"),
    [("a-file", "not a folder"), ("a-file/sub", "cannot make the folder for copies of compressed inputs")],
)
def test_a_cache_dir_that_cannot_be_made_is_one_error_line(
    papers: Path, tmp_path: Path, where: str, problem: str
) -> None:
    (tmp_path / "a-file").write_bytes(b"x")
    cache = tmp_path / where
    result = CliRunner().invoke(app, ["shard", str(papers), "--cache-dir", str(cache), "-q", "-w", "1"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"error: {cache} (given by --cache-dir): {problem}" in result.output
    assert not list(tmp_path.glob("*.zarr*"))


def test_a_cache_dir_that_cannot_be_written_is_refused_before_extraction(
    papers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(NpzMember, "pieces", no_decompression)

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(entries.tempfile, "TemporaryFile", refused)
    cache = tmp_path / "cache"
    with pytest.raises(
        GtoolError, match=rf"{cache} \(given by --cache-dir\): cannot be written \(Permission"
    ):
        run(papers, tmp_path / "s.zarr", cache_dir=str(cache))


@pytest.mark.integration
def test_a_cache_that_cannot_be_written_still_serves_its_copies(
    papers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    run(papers, tmp_path / "a.zarr", cache_dir=str(cache))
    moved = tmp_path / "elsewhere"
    papers.rename(moved)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(entries, "write_atomically", read_only)
    monkeypatch.setattr(NpzMember, "pieces", no_decompression)
    second = run(moved, tmp_path / "b.zarr", cache_dir=str(cache))
    assert second.prepared is not None and len(second.prepared.reused) == 3


@pytest.mark.integration
def test_every_copy_a_run_makes_or_reuses_is_in_its_summary(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    edges = gzipped_edges(tmp_path)
    features = tmp_path / "x.npz"
    np.savez_compressed(features, features=np.random.default_rng(1).random((500, 4), dtype=np.float32))
    made = [str(edges), f"{features}[features]"]
    for store, extracted, reused in (("a.zarr", made, []), ("b.zarr", [], made)):
        summary = run(edges, tmp_path / store, cache_dir=str(cache), num_nodes=500, features=str(features))
        assert summary.prepared is not None
        assert (sorted(summary.prepared.extracted), sorted(summary.prepared.reused)) == (extracted, reused)


def test_a_temporary_file_that_stopped_growing_is_partial_though_its_pid_lives(tmp_path: Path) -> None:
    alive = tmp_path / f"data.npz.0123456789abcdef.x.npy.partial-{os.getpid()}"
    alive.write_bytes(b"cut")
    assert [e.state for e in entries.list_entries(tmp_path)] == ["writing"]
    old = time.time() - entries.WRITING_SECONDS - 1
    os.utime(alive, (old, old))
    assert [e.state for e in entries.list_entries(tmp_path)] == ["partial"]


@pytest.mark.parametrize(
    ("rows", "columns", "message"),
    [(499, 4, "499 feature rows, expected one per node \\(500\\)"), (500, 0, "0 features per node")],
)
def test_a_feature_file_is_checked_before_extraction_or_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int, columns: int, message: str
) -> None:
    features = tmp_path / "x.npz"
    np.savez_compressed(features, features=np.ones((rows, columns), dtype=np.float32))
    monkeypatch.setattr(NpzMember, "pieces", no_decompression)
    monkeypatch.setattr(pipeline, "stage_engine", no_decompression)
    with pytest.raises(InputError, match=message):
        run(gzipped_edges(tmp_path), tmp_path / "s.zarr", num_nodes=500, features=str(features))


@pytest.mark.integration
def test_copies_a_failed_run_finished_are_kept_for_the_next(
    papers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, extract, calls = tmp_path / "cache", NpzMember.extract, []

    def third_fails(self: NpzMember, dest: str, done=None, before_rename=None) -> str:
        calls.append(self.key)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return extract(self, dest, done, before_rename)

    monkeypatch.setattr(NpzMember, "extract", third_fails)
    monkeypatch.setattr(extraction, "available_cores", lambda: 1)
    with pytest.raises(GtoolError, match="no space left"):
        run(papers, tmp_path / "a.zarr", cache_dir=str(cache))
    assert [e.state for e in entries.list_entries(cache)] == ["current"] * 2
    monkeypatch.undo()
    second = run(papers, tmp_path / "b.zarr", cache_dir=str(cache))
    assert second.prepared is not None and len(second.prepared.reused) == 2
    assert len(second.prepared.extracted) == 1


def test_clear_leaves_the_copies_a_running_shard_holds(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    copies = [cache / f"x.npz.0123456789abcdef.{key}.npy" for key in ("a", "b")]
    for copy in copies:
        copy.write_bytes(b"data")
    record = Preparation()
    assert record.hold(str(copies[0])) and not record.hold(str(cache / "gone.0123456789abcdef.npy"))
    output = cache_cli(cache, "clear")
    assert "removed 1 copies" in output and "1 copies in use by a running gtool shard: left" in output
    assert [p.name for p in cache.iterdir()] == [copies[0].name]
    record.close()
    assert "removed 1 copies" in cache_cli(cache, "clear") and list(cache.iterdir()) == []


def test_a_new_copy_is_held_before_it_is_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gtool cache clear` between a copy's rename and its note (gunzipped or extracted) finds it held and
    leaves it, where it removed it before (and the run failed on the copy it had just made)."""
    cache, edges = tmp_path / "cache", gzipped_edges(tmp_path)
    features = tmp_path / "x.npz"
    np.savez_compressed(features, features=np.ones((4, 2), dtype=np.float32))
    left, note = [], entries.note_source

    def clear_then_note(copy: str, path: str, made_by: str | None = None) -> None:
        left.append(len(entries.remove_entries(entries.list_entries(cache))[1]))
        note(copy, path, made_by)

    monkeypatch.setattr(entries, "note_source", clear_then_note)
    monkeypatch.setattr(extraction, "note_source", clear_then_note)
    with watching() as record:
        entries.work_copy(str(cache), str(edges), ".plain", lambda out: out.write(b"0 1\n"))
        member = NpzMember(str(features), "features")
        extraction.extract_members(
            [(member, entries.work_copy_path(str(cache), str(features), ".features.npy"))]
        )
    record.close()
    assert left == [1, 2] and [e.state for e in entries.list_entries(cache)] == ["current"] * 2


def test_a_run_missing_copies_another_is_making_waits_and_reuses_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two runs that start together on one input: the second waits while the first holds the input, then
    reuses the copy the first made, instead of writing its own beside it."""
    cache, edges = tmp_path / "cache", gzipped_edges(tmp_path)
    copy = entries.work_copy_path(str(cache), str(edges), ".plain")
    written, made = [], []

    def write(out) -> None:
        written.append(out.write(b"0 1\n"))

    second = threading.Thread(
        target=lambda: made.append(entries.work_copy(str(cache), str(edges), ".plain", write))
    )
    with entries.making_copies_of([str(edges)]):
        second.start()
        time.sleep(0.2)
        assert second.is_alive()
        Path(copy).write_bytes(b"0 1\n")
        entries.note_source(copy, str(edges))
    second.join(timeout=10)
    assert made == [copy] and written == []
    assert f"notice: waiting for another gtool shard that is making the copies of {edges}" in caplog.text


def test_a_temporary_file_of_a_killed_run_not_yet_reaped_is_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zombie has let go of its locks: a run that waited for it must not take its file for one being
    written (and leave it)."""
    partial = tmp_path / f"x.npz.0123456789abcdef.a.npy.partial-{os.getpid()}"
    partial.write_bytes(b"cut")
    assert entries.is_written(partial)
    monkeypatch.setattr(entries.psutil.Process, "status", lambda process: entries.psutil.STATUS_ZOMBIE)
    assert not entries.is_written(partial)


def test_cache_commands_on_a_missing_folder_or_a_file(tmp_path: Path) -> None:
    listed = cache_cli(tmp_path / "typo", "list")
    assert listed == f"nothing cached in {tmp_path / 'typo'} (given by --cache-dir, which does not exist)\n"
    (tmp_path / "empty").mkdir()
    assert (
        cache_cli(tmp_path / "empty", "list")
        == f"nothing cached in {tmp_path / 'empty'} (given by --cache-dir)\n"
    )
    (tmp_path / "f.npy").write_bytes(b"x")
    result = CliRunner().invoke(app, ["cache", "clear", "--cache-dir", str(tmp_path / "f.npy")])
    assert (
        result.exit_code == 2
        and f"error: {tmp_path / 'f.npy'} (given by --cache-dir): not a folder" in result.output
    )
    assert (tmp_path / "f.npy").exists()


@pytest.mark.parametrize("flag", ["--cache-dir", "--spill-dir"])
def test_an_empty_folder_option_is_refused(tmp_path: Path, flag: str) -> None:
    result = CliRunner().invoke(app, ["shard", "rmat:8:4", "-o", str(tmp_path / "s.zarr"), flag, "", "-q"])
    assert result.exit_code == 2 and f"error: {flag} is empty" in result.output


def test_a_spill_or_cache_folder_in_the_output_is_refused(tmp_path: Path) -> None:
    """Publishing the store replaces the output's path: a folder there is refused up front, not reported
    as made 'by another program' once the run is over."""
    store = tmp_path / "s.zarr"
    for flag, folder in (("--cache-dir", store), ("--spill-dir", store / "spill")):
        result = CliRunner().invoke(app, ["shard", "rmat:8:4", "-o", str(store), flag, str(folder), "-q"])
        assert result.exit_code == 2 and f"error: {folder} (" in result.output, result.output
        assert "is the output store" in result.output and not store.exists()


def test_a_copy_made_again_removes_the_temporary_files_interrupted_runs_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Left by `kill -9`: removed by the next run that makes the same copy (gunzipped or extracted), but
    not one another live process is writing (grown within WRITING_SECONDS), nor another copy's."""
    cache, edges = tmp_path / "cache", gzipped_edges(tmp_path)
    features = tmp_path / "x.npz"
    np.savez_compressed(features, features=np.ones((4, 2), dtype=np.float32))
    member = NpzMember(str(features), "features")
    copies = {
        entries.work_copy_path(str(cache), str(edges), ".plain"): lambda copy: entries.work_copy(
            str(cache), str(edges), ".plain", lambda out: out.write(b"0 1\n")
        ),
        entries.work_copy_path(str(cache), str(features), ".features.npy"): lambda copy: (
            extraction.extract_members([(member, copy)])
        ),
    }
    old = time.time() - entries.WRITING_SECONDS - 1
    for copy, make in copies.items():
        ends = (".partial-999999999", ".source.json.partial-1", f".partial-{os.getppid()}")
        dead, stopped, live = (Path(f"{copy}{end}") for end in ends)
        for partial in (dead, stopped, live):
            partial.write_bytes(b"cut")
        os.utime(stopped, (old, old))
        other = cache / "y.npz.0123456789abcdef.z.npy.partial-999999999"
        other.write_bytes(b"cut")
        caplog.clear()
        make(copy)
        assert Path(copy).exists() and live.exists() and other.exists()
        assert not dead.exists() and not stopped.exists()
        assert "notice: removed 2 temporary file(s) of" in caplog.text and "(pid 1, 999999999)" in caplog.text
        live.unlink()


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("--cache-dir", "given by --cache-dir"),
        ("GTOOL_CACHE", "from $GTOOL_CACHE"),
        ("--root", "the default: ROOT/gtool-cache"),
    ],
)
def test_every_error_about_the_cache_folder_says_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, origin: str
) -> None:
    """A user who never typed the path learns which setting named it (not a folder, cannot be written)."""
    root = tmp_path / "root"
    folder = {"--root": root / "gtool-cache"}.get(given, tmp_path / "in-the-way")
    folder.parent.mkdir(exist_ok=True)
    folder.write_bytes(b"x")
    monkeypatch.delenv("GTOOL_CACHE")
    args = {"--cache-dir": ["--cache-dir", str(folder)], "--root": ["--root", str(root)]}.get(given, [])
    if given == "GTOOL_CACHE":
        monkeypatch.setenv("GTOOL_CACHE", str(folder))
    edges = gzipped_edges(tmp_path)

    def error(*command: str) -> str:
        result = CliRunner().invoke(app, [*command, *args], env={"COLUMNS": "300"})
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        return " ".join(result.output.split())

    shard = ("shard", str(edges), "-o", str(tmp_path / "s.zarr"), "--num-nodes", "500", "-q")
    assert f"error: {folder} ({origin}" in error(*shard) and "not a folder" in error(*shard)
    assert f"error: {folder} ({origin}" in error("cache", "list")
    folder.unlink()

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(entries.tempfile, "TemporaryFile", refused)
    assert f"error: {folder} ({origin}" in error(*shard) and "cannot be written" in error(*shard)


def test_hand_edited_notes_and_a_folder_in_a_copys_place(tmp_path: Path) -> None:
    """A note edited into other types (a source that is no path, a size that is no number) is no note: its
    copy is 'unknown' (`gtool cache list` does not fail) and made again; a folder under a copy's name is an
    error naming it, not a traceback."""
    cache, edges = tmp_path / "cache", gzipped_edges(tmp_path)

    def make() -> Path:
        return Path(entries.work_copy(str(cache), str(edges), ".plain", lambda out: out.write(b"0 1\n")))

    copy = make()
    note = Path(f"{copy}{entries.NOTE_SUFFIX}")
    for edit in ({"source": None}, {"source": 3}, {"size": "12"}, {"copy_mtime_ns": 1.5}):
        note.write_text(json.dumps({**json.loads(note.read_text()), **edit}))
        assert "unknown" in cache_cli(cache, "list")
        make()
        assert [e.state for e in entries.list_entries(cache)] == ["current"]
    copy.unlink()
    note.unlink()
    copy.mkdir()
    in_the_way = f"{copy.name} there, where the copy of .* is not a file"
    with pytest.raises(entries.CacheFolderError, match=in_the_way):
        make()


def test_a_leading_tilde_is_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~ in --cache-dir, $GTOOL_CACHE or ROOT left unexpanded (an env file, a quoted value) is the home
    folder, not a folder named ~ wherever gtool runs."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GTOOL_CACHE", "~/env-cache")
    assert entries.cache_folder(None, None).path == tmp_path / "env-cache"
    assert entries.cache_folder("~/given", None).path == tmp_path / "given"
    monkeypatch.delenv("GTOOL_CACHE")
    assert entries.cache_folder(None, "~/data").path == tmp_path / "data" / "gtool-cache"


def test_a_conversion_another_version_made_is_made_again(tmp_path: Path) -> None:
    """A copy whose note names another conversion (or none: an earlier gtool's) is made again; one made
    by this conversion is reused, also after a moved input renewed its note; both list as current."""
    cache, edges = tmp_path / "cache", gzipped_edges(tmp_path)
    written = []

    def make(source: Path, made_by: str | None) -> None:
        entries.work_copy(
            str(cache), str(source), ".npy", lambda out: written.append(out.write(b"x")), 1, made_by
        )

    make(edges, None)
    assert len(written) == 1 and [e.state for e in entries.list_entries(cache)] == ["current"]
    make(edges, "csv 2")
    (tmp_path / "moved").mkdir()
    moved = edges.rename(tmp_path / "moved" / edges.name)
    make(moved, "csv 2")
    make(moved, "csv 2")
    assert len(written) == 2 and [e.state for e in entries.list_entries(cache)] == ["current"]
