"""Checksummed stores: a flipped bit anywhere in a chunk is caught by reads, `gtool verify` and `gtool train`;
stores written before checksums, or with chunk keys in folders, still open and verify."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr
from typer.testing import CliRunner
from zarr.codecs import ZstdCodec

from gtool.cli.main import app
from gtool.errors import DamagedChunkError, StoreError
from gtool.geometry.bands import Band
from gtool.loader import load_rank
from gtool.loader.load import read_node_ids
from gtool.store import layout
from gtool.store.reader import Store, open_store
from gtool.store.values import permutations_digest
from gtool.store.verify import row_spans, verify_store
from gtool.store.writing import chunk_writer
from gtool.store.writing.chunk_writer import ChunkSink
from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.predict.writer import HeldBlock, write_node_rows
from tests.support.reference import assert_same_sparse, reassemble
from tests.support.storefiles import CHUNK_KEY, array_chunks
from tests.support.stores import StoreFactory, make_store

FAMILIES = {"adjacency": "adj/", "features": "nodes/features", "labels": "nodes/labels/", "perm": "perm/"}
FLIPS = 50


def gtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gtool.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> Path:
    return Path(stores("rmat:7:4", tiles=3, num_features=8, num_classes=4))


def chunk_files(store: Path, families: dict[str, str] = FAMILIES) -> dict[str, list[Path]]:
    """Chunk files of the store by family."""
    files = sorted(
        p for p in store.rglob("*") if p.is_file() and CHUNK_KEY.fullmatch(p.relative_to(store).as_posix())
    )
    return {
        family: [p for p in files if p.relative_to(store).as_posix().startswith(prefix)]
        for family, prefix in families.items()
    }


def array_of(chunk: Path, store: Path) -> str:
    return CHUNK_KEY.fullmatch(chunk.relative_to(store).as_posix()).group(1)


def damaged_copy(store: Path, target: Path, chunk: Path, byte: int, bit: int) -> Path:
    """A fresh copy of the store with one bit of one chunk file flipped."""
    shutil.copytree(store, target)
    flip_bit(target / chunk.relative_to(store), byte, bit)
    return target


def flip_bit(file: Path, byte: int, bit: int) -> bytes:
    """Flip one bit of `file` (its byte `byte` modulo its size); returns its bytes before."""
    intact = file.read_bytes()
    data = bytearray(intact)
    data[byte % len(data)] ^= 1 << bit
    file.write_bytes(bytes(data))
    return intact


def flips(store: Path, count: int, seed: int) -> list[tuple[Path, int, int]]:
    """`count` (chunk file, byte, bit) positions, cycling over the families."""
    rng = np.random.default_rng(seed)
    files = chunk_files(store)
    families = list(FAMILIES)
    out = []
    for k in range(count):
        chunk = files[families[k % len(families)]][rng.integers(len(files[families[k % len(families)]]))]
        out.append((chunk, int(rng.integers(chunk.stat().st_size)), int(rng.integers(8))))
    return out


def test_an_undamaged_store_verifies_clean(store: Path) -> None:
    run = gtool("verify", str(store))
    assert run.returncode == 0, run.stderr
    assert "no problems found" in run.stdout  # the report is the result: stdout
    report = verify_store(open_store(str(store)))
    assert report.ok and report.unchecksummed_arrays == 0
    assert report.chunks == len(chunk_files(store, {"all": ""})["all"])
    assert report.transposed_pairs == 9 and set(report.tiles) == {0, 1}


def test_every_flipped_bit_fails_verification_naming_the_array(store: Path, tmp_path: Path) -> None:
    """Each flip damages one copy of the store, verified with that one bit flipped, then put back."""
    copy = shutil.copytree(store, tmp_path / "flipped.zarr")
    assert verify_store(open_store(str(copy))).ok
    for chunk, byte, bit in flips(store, FLIPS, seed=0):
        damaged = copy / chunk.relative_to(store)
        intact = flip_bit(damaged, byte, bit)
        problems = verify_store(open_store(str(copy))).problems
        assert problems, f"flip of bit {bit} of byte {byte} in {chunk} went unnoticed"
        assert any(array_of(chunk, store) in p for p in problems), problems
        damaged.write_bytes(intact)


def test_gtool_verify_names_each_damaged_array_and_exits_1(store: Path, tmp_path: Path) -> None:
    files = chunk_files(store)
    chunks = [files["adjacency"][4], files["labels"][0], files["perm"][1]]
    copy = shutil.copytree(store, tmp_path / "d.zarr")
    for chunk in chunks:
        damaged = copy / chunk.relative_to(store)
        damaged.write_bytes(damaged.read_bytes()[:-1] + bytes([damaged.read_bytes()[-1] ^ 0x10]))
    run = gtool("verify", str(copy))
    assert run.returncode == 1
    for chunk in chunks:
        assert f"array {array_of(chunk, store)}, chunk 0: stored checksum does not match" in run.stdout
    assert "3 problem(s)" in run.stdout


@pytest.mark.parametrize("family", ["adjacency", "features"])
def test_gtool_train_refuses_a_damaged_store(store: Path, tmp_path: Path, family: str) -> None:
    chunk = chunk_files(store)[family][0]
    copy = damaged_copy(store, tmp_path / "d.zarr", chunk, byte=3, bit=5)
    run = gtool("train", str(copy), "--grid", "1x1x1", "--epochs", "1", "--layers", "2", "--hidden", "8")
    assert run.returncode != 0
    assert f"array {array_of(chunk, store)}" in run.stderr and "checksum" in run.stderr


def test_a_damaged_chunk_read_names_store_tile_and_array(store: Path, tmp_path: Path) -> None:
    chunk = next(p for p in chunk_files(store)["adjacency"] if "/1_2/col/" in p.as_posix())
    copy = damaged_copy(store, tmp_path / "d.zarr", chunk, byte=0, bit=0)
    with pytest.raises(DamagedChunkError, match=r"matrix A0 tile \(1, 2\): array adj/0/1_2/col, chunk 0"):
        open_store(str(copy)).read_tile(0, 1, 2)


def store_written_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, setting: str, value: object
) -> Store:
    """rmat:7:4 (the store fixture's graph) sharded into tmp_path/old.zarr with gtool.store.layout's `setting`
    as it was before."""
    monkeypatch.setattr(layout, setting, value)
    chunk_writer._template.cache_clear()
    try:
        return open_store(
            make_store("rmat:7:4", tmp_path / "old.zarr", tiles=3, num_features=8, num_classes=4)
        )
    finally:
        chunk_writer._template.cache_clear()


def test_a_store_written_without_checksums_still_opens_verifies_and_loads(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old way: zstd only, as every store was written before checksums."""
    old = store_written_as_before(
        monkeypatch, tmp_path, "CHUNK_CODECS", (ZstdCodec(level=0, checksum=False),)
    )
    assert '"crc32c"' not in (tmp_path / "old.zarr" / "perm" / "r" / "zarr.json").read_text()
    report = verify_store(old)
    assert report.ok and report.unchecksummed_arrays == report.arrays > 0
    new = open_store(str(store))
    for m in (0, 1):
        assert_same_sparse(reassemble(old, m), reassemble(new, m), tol=0)
    assert load_rank(old, (1, 1, 1), 0, 2).features.shape[0] == old.num_nodes


def test_chunks_lie_beside_their_array_and_a_store_with_chunk_folders_still_reads(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks are ARRAY/c.0 (no folder per array); stores written before, as ARRAY/c/0, read the same."""
    col = store / layout.tile_array(0, 1, 2, "col")
    assert sorted(p.name for p in col.iterdir()) == ["c.0", "zarr.json"]
    old = store_written_as_before(monkeypatch, tmp_path, "CHUNK_KEYS", {"name": "default", "separator": "/"})
    assert (tmp_path / "old.zarr" / layout.tile_array(0, 1, 2, "col") / "c" / "0").is_file()
    assert verify_store(old).ok
    new = open_store(str(store))
    for m in (0, 1):
        assert_same_sparse(reassemble(old, m), reassemble(new, m), tol=0)
    np.testing.assert_array_equal(
        load_rank(old, (1, 1, 1), 0, 2).features, load_rank(new, (1, 1, 1), 0, 2).features
    )


def test_verify_lists_every_broken_invariant_of_well_checksummed_chunks(store: Path, tmp_path: Path) -> None:
    """Arrays rewritten through zarr (valid checksums, wrong contents): each broken invariant is named."""
    copy = shutil.copytree(store, tmp_path / "bad.zarr")
    group = zarr.open_group(str(copy), mode="r+")
    val = group[layout.tile_array(1, 2, 0, "val")]
    val[0] = val[0] * 2
    col = group[layout.tile_array(0, 1, 1, "col")]
    col[col.shape[0] - 1] = 10_000
    perm = group[layout.PERM_COLS]
    perm[0] = perm[1]
    group[layout.PERM_ROWS][3] = -1
    labels = group[layout.LABELS["r"]]
    labels[5] = 99
    split = group[layout.SPLIT["c"]]
    split[7] = 3
    problems = verify_store(open_store(str(copy))).problems
    expected = [
        "A1 tile (2, 0) (array adj/1/2_0) is not A0 tile (0, 2) transposed: weights differ",
        "A0 tile (1, 1) (array adj/0/1_1): column index outside",
        "array perm/c: not a permutation (node ids repeated)",
        "array perm/r: node ids outside [0, 128)",
        "array perm/r: not a permutation (1 of 128 node ids never appear)",
        "array nodes/labels/r: values outside [-1, 3] in rows 0-127",
        "array nodes/split/c: codes other than [-1, 0, 1, 2] in rows 0-127",
    ]
    for text in expected:
        assert any(p.startswith(text) for p in problems), (text, problems)


def test_arrays_of_another_dtype_kind_are_refused_naming_them(store: Path, tmp_path: Path) -> None:
    """A zarr.json edited to a dtype of the same width decodes: int32 weights or float64 labels would read
    as numbers; reads, verify and the open refuse them, and nnz that the tile counts disagree with."""
    copy = shutil.copytree(store, tmp_path / "kinds.zarr")
    val = layout.tile_array(0, 1, 1, "val")
    edit_json(copy / val / "zarr.json", lambda d: d.update(data_type="int32"))
    opened = open_store(str(copy))
    expected = f"array {val} has dtype int32, expected float32"
    with pytest.raises(StoreError, match=rf"matrix A0 tile \(1, 1\): {expected}"):
        opened.read_tile(0, 1, 1)
    assert [p for p in verify_store(opened).problems if p.startswith(expected)]
    labels = copy / layout.LABELS["c"] / "zarr.json"
    edit_json(labels, lambda d: d.update(data_type="float64", fill_value=0.0))
    with pytest.raises(StoreError, match="array nodes/labels/c has dtype float64, expected int64"):
        open_store(str(copy))
    edit_json(labels, lambda d: d.update(data_type="int64", fill_value=0))
    edit_json(copy / "zarr.json", lambda d: d["attributes"]["gtool"]["nnz"].update({"0": 5}))
    with pytest.raises(StoreError, match="metadata nnz of A0 is 5, its stats' tile_nnz add up to"):
        open_store(str(copy))


def test_verify_finds_label_orders_that_disagree(store: Path, tmp_path: Path) -> None:
    """labels/c's chunk copied over labels/r's: valid checksum, every value in range; the orders disagree."""
    copy = shutil.copytree(store, tmp_path / "mixed.zarr")
    for chunk in array_chunks(copy / layout.LABELS["c"]):
        shutil.copy(chunk, copy / layout.LABELS["r"] / chunk.name)
    problems = verify_store(open_store(str(copy))).problems
    assert problems == [
        "arrays nodes/labels/r and nodes/labels/c disagree: some node's labels value differs between the two "
        "orders (a chunk of another array or store, its checksum valid?)"
    ]


def test_ranks_refuse_a_permutation_that_would_misplace_rows(store: Path, tmp_path: Path) -> None:
    """perm/r with an id out of range (an IndexError in predict) or repeated (predict published a zero row
    as complete): each is refused naming the array."""
    copy = shutil.copytree(store, tmp_path / "perm.zarr")
    perm = zarr.open_array(str(copy / layout.PERM_ROWS), mode="r+")
    ids = perm[:]
    n = ids.size
    rows, cols = Band(0, 0, n, n), Band(0, 0, 2, 2)
    perm[1] = n
    with pytest.raises(StoreError, match=rf"array perm/r \(rows 0-{n - 1}\): node ids outside \[0, {n}\)"):
        read_node_ids(open_store(str(copy)), "r", rows)
    perm[1] = ids[0]
    held = HeldBlock(torch.ones(n, 2), rows, "r", cols, True)
    alone = AxisGroup(1, 0, None, PhaseTimer(torch.device("cpu")), torch.device("cpu"))
    sink = ChunkSink(str(tmp_path / "out.zarr"))
    with pytest.raises(StoreError, match=f"array perm/r: node {ids[1]} appears 0 times"):
        write_node_rows(sink, "logits", open_store(str(copy)), held, [cols], 2, alone)


def without_chunk(store: Path, target: Path, chunk: Path) -> Path:
    """A fresh copy of the store with one chunk file removed."""
    shutil.copytree(store, target)
    (target / chunk.relative_to(store)).unlink()
    return target


def test_a_missing_chunk_file_of_any_array_fails_verify_and_reads_naming_the_array(
    store: Path, tmp_path: Path
) -> None:
    """Zarr reads a missing chunk as its fill value (labels 0, features 0); gtool stores every chunk, so a
    missing one is damage: verify lists it, reads and the trainer's check refuse it, naming the array."""
    rng = np.random.default_rng(1)
    files = chunk_files(store, {**FAMILIES, "split": "nodes/split/"})
    sampled = [
        family[k]
        for family in files.values()
        for k in rng.choice(len(family), min(2, len(family)), replace=False)
    ]
    for k, chunk in enumerate(sampled):
        array = array_of(chunk, store)
        copy = open_store(str(without_chunk(store, tmp_path / f"m{k}.zarr", chunk)))
        problems = verify_store(copy).problems
        assert [p for p in problems if p.startswith(f"array {array}, chunk ") and ": missing" in p], problems
        with pytest.raises(DamagedChunkError, match=f"array {array}, chunk .*: missing"):
            copy.check_every_chunk()
        with pytest.raises(DamagedChunkError, match=f"array {array}, chunk .*: missing"):
            copy.read(copy.array(array))
        shutil.rmtree(copy.location)


def test_loading_a_rank_refuses_a_missing_feature_chunk(store: Path, tmp_path: Path) -> None:
    chunk = chunk_files(store)["features"][0]
    copy = without_chunk(store, tmp_path / "m.zarr", chunk)
    with pytest.raises(DamagedChunkError, match=rf"{copy}: array nodes/features, chunk \(0, 0\): missing"):
        load_rank(str(copy), (1, 1, 1), 0, 2)


def test_gtool_verify_and_train_refuse_a_store_missing_a_label_chunk(store: Path, tmp_path: Path) -> None:
    """The issue's case: without nodes/labels/c/c.0 every label read as class 0 and training 'succeeded'."""
    copy = without_chunk(store, tmp_path / "m.zarr", store / layout.LABELS["c"] / "c.0")
    run = gtool("verify", str(copy))
    assert run.returncode == 1
    assert "problem: array nodes/labels/c, chunk 0: missing" in run.stdout
    assert "not so: see the problems below" in run.stdout  # the summary claims no check that failed
    run = gtool("train", str(copy), "--grid", "1x1x1", "--epochs", "1", "--layers", "2", "--hidden", "8")
    assert run.returncode == 2
    assert "error: " in run.stderr and "array nodes/labels/c, chunk 0: missing" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("rank, lists", [("0", True), ("1", False)])
def test_under_torchrun_only_rank_0_lists_the_store_before_training(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank: str, lists: bool
) -> None:
    copy = without_chunk(store, tmp_path / "m.zarr", store / layout.LABELS["c"] / "c.0")
    launched = {"RANK": rank, "WORLD_SIZE": "2", "LOCAL_RANK": rank, "MASTER_ADDR": "127.0.0.1"}
    for name, value in launched.items():
        monkeypatch.setenv(name, value)
    started, told = [], []
    monkeypatch.setattr("gtool.trainer.fit.train.train", lambda config, ranks: started.append(config))
    # the refusal is told to the waiting ranks (as tests/trainer/test_two_nodes.py runs it): without
    # rank 1 to read it, rank 0 would wait TOLD_SECONDS (30 s) for a reader
    monkeypatch.setattr("gtool.cli.common.tell_waiting_ranks", told.append)
    run = CliRunner().invoke(app, ["train", str(copy), "--grid", "2x1x1", "--epochs", "1"])
    assert (run.exit_code == 2 and "chunk 0: missing" in run.output) if lists else (run.exit_code == 0)
    assert len(started) == (0 if lists else 1)
    assert [("chunk 0: missing" in message) for message in told] == ([True] if lists else [])


def test_a_store_written_before_every_chunk_was_stored_opens_with_a_notice(
    store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Old stores lack `every_chunk_stored`: their missing chunks read as fill values, as they always did."""
    copy = without_chunk(store, tmp_path / "old.zarr", store / layout.SPLIT["r"] / "c.0")
    group = zarr.open_group(str(copy), mode="r+")
    meta = dict(group.attrs["gtool"])
    assert meta.pop("every_chunk_stored") is True
    group.attrs["gtool"] = meta
    with caplog.at_level("WARNING", logger="gtool"):
        old = open_store(str(copy))
    assert "written before gtool stored every chunk" in caplog.text
    assert not old.meta.every_chunk and old.absent_chunks() == {}
    assert verify_store(old).ok
    assert (old.read(old.array(layout.SPLIT["r"])) == 0).all()


def test_arrays_are_written_with_every_chunk_also_those_equal_to_the_fill_value(tmp_path: Path) -> None:
    from gtool.store.writing.codecs import create_array

    create_array(store=str(tmp_path / "z"), name="split", data=np.zeros(5, dtype=np.int8), chunks=(2,))
    assert [p.name for p in array_chunks(tmp_path / "z" / "split")] == ["c.0", "c.1", "c.2"]


def edit_json(path: Path, change) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def unknown_codec(copy: Path) -> None:
    edit_json(copy / "perm" / "r" / "zarr.json", lambda d: d["codecs"][1].update(name="nosuchcodec"))


def no_stats(copy: Path) -> None:
    edit_json(copy / "zarr.json", lambda d: d["attributes"]["gtool"].pop("stats"))


def nan_mean(copy: Path) -> None:
    edit_json(copy / "zarr.json", lambda d: d["attributes"]["gtool"]["stats"]["0"].update(mean=float("nan")))


def zarr_v2(copy: Path) -> None:
    shutil.rmtree(copy)
    zarr.open_group(str(copy), mode="w", zarr_format=2).attrs["gtool"] = {"layout": 1, "complete": True}


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (unknown_codec, "perm/r/zarr.json cannot be read (UnknownCodecError: Unknown codec: 'nosuchcodec')"),
        (no_stats, "metadata has no 'stats' (re-run gtool shard)"),
        (nan_mean, "metadata 'stats.0.mean' is nan, expected a finite number"),  # info --json printed NaN
        (zarr_v2, "a Zarr v2 group, expected Zarr v3"),
    ],
    ids=["unknown-codec", "no-stats", "nan-mean", "zarr-v2"],
)
@pytest.mark.parametrize("command", ["info", "verify", "stats"])
def test_unreadable_store_metadata_is_one_error_line(
    store: Path, tmp_path: Path, damage, message: str, command: str
) -> None:
    copy = shutil.copytree(store, tmp_path / "bad.zarr")
    damage(copy)
    result = CliRunner().invoke(app, [command, str(copy)], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"error: {copy}: {message}" in result.output


def test_row_spans_step_over_chunk_rows_never_written() -> None:
    array = zarr.create_array(zarr.storage.MemoryStore(), shape=(100, 3), chunks=(10, 3), dtype="f4")
    spans = [(r.start, r.stop, w) for r, w in row_spans(array, np.array([0, 1, 5]), 15)]
    assert spans == [(0, 15, True), (15, 20, True), (20, 50, False), (50, 60, True), (60, 100, False)]
    assert [(r.start, r.stop) for r, _ in row_spans(array, None, 40)] == [(0, 40), (40, 80), (80, 100)]


@pytest.mark.parametrize("every_chunk", [True, False], ids=["every-chunk-stored", "older-store"])
def test_verify_of_metadata_claiming_a_trillion_nodes_lists_the_missing_chunks_without_reading(
    store: Path, tmp_path: Path, every_chunk: bool
) -> None:
    """Every node array's zarr.json and the metadata edited to 10^12 rows: verify lists, in bounded memory,
    that the claimed chunks were never stored (it allocated 931 GiB for the permutation check before). A
    store written before every chunk was stored holds no missing chunk: verify steps over the chunks never
    written (it read them, a million per array) and finds the permutation check beyond its budget."""
    copy = shutil.copytree(store, tmp_path / "big.zarr")
    nodes = 10**12

    def claim(meta: dict) -> None:
        meta["num_nodes"], meta["tile_size"] = nodes, -(-nodes // 3)
        if not every_chunk:
            del meta["every_chunk_stored"]

    edit_json(copy / "zarr.json", lambda d: claim(d["attributes"]["gtool"]))
    node_arrays = [layout.PERM_ROWS, layout.PERM_COLS, layout.FEATURES, *layout.LABELS.values()]
    for path in [*node_arrays, *layout.SPLIT.values()]:
        edit_json(copy / path / "zarr.json", lambda d: d["shape"].__setitem__(0, nodes))
    tracemalloc.start()
    try:
        report = verify_store(open_store(str(copy)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20
    if not every_chunk:
        assert report.node_rows == nodes and not report.clean("perm") and report.clean("nodes/", "chunks")
        assert "node ids need" in " ".join(report.problems)
        return
    for path in [*node_arrays, *layout.SPLIT.values()]:
        assert any(p.startswith(f"array {path}, chunk ") and "more: missing" in p for p in report.problems)
    assert not report.clean("chunks")
    stats = CliRunner().invoke(app, ["stats", str(copy)], env={"COLUMNS": "300"})  # allocated 233 GiB
    assert stats.exit_code == 2 and "more: missing (no chunk file" in stats.output, stats.output


def test_verify_refuses_a_permutation_check_beyond_its_memory_budget(store: Path) -> None:
    report = verify_store(open_store(str(store)), memory_budget=100)
    assert report.problems == [
        "arrays perm/r and perm/c: not checked: 128 node ids need 256 bytes of marks, beyond the memory "
        "budget of 100 bytes (metadata num_nodes too large?)"
    ]
    assert not report.clean("perm") and report.clean("nodes/", "adj/", "A0", "A1", "chunks")


@pytest.mark.parametrize("command", [["verify"], ["info"], ["train", "--epochs", "1"]])
def test_a_class_count_beyond_the_nodes_is_refused_before_any_allocation(
    store: Path, tmp_path: Path, command: list[str]
) -> None:
    """num_classes edited to 10^12 passed `gtool verify`, and `gtool train` allocated 64 TB for its logits;
    the refusal said the limit was "100,000: one class per node" for 128 nodes."""
    copy = shutil.copytree(store, tmp_path / "classes.zarr")
    edit_json(copy / "zarr.json", lambda d: d["attributes"]["gtool"].update(num_classes=10**12))
    result = CliRunner().invoke(app, [command[0], str(copy), *command[1:]], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    message = (
        f"error: {copy}: metadata 'num_classes' says 1,000,000,000,000 classes, above the limit of 100,000 "
        "for a graph of 128 nodes (the larger of its node count and 100,000: more would be classes no node "
        "can have, and the model's output layer is sized by the count); the metadata is damaged"
    )
    assert [line for line in result.output.splitlines() if line.startswith("error:")] == [message]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classes.zarr"]


def test_a_permutations_digest_is_recorded_checked_by_verify_and_computed_for_older_stores(
    store: Path, tmp_path: Path
) -> None:
    opened = open_store(str(store))
    digest = opened.meta.permutation.digest
    assert digest == permutations_digest(opened.perm("r"), opened.perm("c")) == opened.node_order["digest"]
    copy = shutil.copytree(store, tmp_path / "old.zarr")
    edit_json(copy / "zarr.json", lambda d: d["attributes"]["gtool"]["permutation"].pop("digest"))
    older = open_store(str(copy))
    assert older.meta.permutation.digest is None and "digest" not in older.meta.node_order
    assert older.node_order == opened.node_order and verify_store(older).ok
    edit_json(copy / "zarr.json", lambda d: d["attributes"]["gtool"]["permutation"].update(digest="ab" * 16))
    assert verify_store(open_store(str(copy))).problems == [
        f"arrays perm/r and perm/c: their digest is {digest}, but the metadata's permutation.digest is "
        f"{'ab' * 16} (the store's node order)"
    ]
