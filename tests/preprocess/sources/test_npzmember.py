"""NpzMember: stored members memory-mapped in place, deflated ones streamed, never loaded whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gtool.errors import InputError
from gtool.preprocess.sources.npzmember import NpzMember, npz_keys

ARRAYS = {
    "edge_index": np.arange(2 * 1000, dtype=np.int64).reshape(2, 1000),
    "node_feat": np.asfortranarray(np.linspace(0, 1, 300, dtype=np.float32).reshape(30, 10)),
    "num_nodes": np.int64(42),
}


@pytest.fixture(params=["stored", "deflated"])
def archive(request, tmp_path: Path) -> tuple[str, bool]:
    save = np.savez if request.param == "stored" else np.savez_compressed
    path = tmp_path / "data.npz"
    save(path, **ARRAYS)
    return str(path), request.param == "deflated"


def test_header(archive: tuple[str, bool]) -> None:
    path, compressed = archive
    assert sorted(npz_keys(path)) == sorted(ARRAYS)
    member = NpzMember(path, "node_feat")
    assert (member.shape, member.dtype, member.fortran_order, member.compressed) == (
        (30, 10),
        np.dtype(np.float32),
        True,
        compressed,
    )


@pytest.mark.parametrize("key", list(ARRAYS))
def test_extract_and_iter_flat(archive: tuple[str, bool], tmp_path: Path, key: str) -> None:
    path, _ = archive
    member = NpzMember(path, key)
    expected = ARRAYS[key]
    extracted = np.load(member.extract(str(tmp_path / f"{key}.npy")), mmap_mode="r")
    np.testing.assert_array_equal(extracted, expected)
    flat = np.concatenate(list(member.iter_flat(7)))
    np.testing.assert_array_equal(flat, np.ravel(expected, order="F" if member.fortran_order else "C"))


def test_memmap_stored_or_refuse_deflated(archive: tuple[str, bool]) -> None:
    path, compressed = archive
    member = NpzMember(path, "edge_index")
    if compressed:
        with pytest.raises(ValueError, match="extract"):
            member.memmap()
        return
    mapped = member.memmap()
    assert isinstance(mapped, np.memmap)
    np.testing.assert_array_equal(mapped, ARRAYS["edge_index"])
    np.testing.assert_array_equal(NpzMember(path, "node_feat").memmap(), ARRAYS["node_feat"])
    assert int(NpzMember(path, "num_nodes.npy").memmap()) == 42


def test_missing_key_lists_the_keys(archive: tuple[str, bool]) -> None:
    with pytest.raises(InputError, match="no array 'labels'.*edge_index"):
        NpzMember(archive[0], "labels")


def test_truncated_archive(tmp_path: Path) -> None:
    path = tmp_path / "cut.npz"
    np.savez_compressed(path, x=np.arange(10000))
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(InputError, match="zip"):
        NpzMember(str(path), "x")


def test_corrupt_deflated_data(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    np.savez_compressed(path, x=np.random.default_rng(0).random(20000))
    data = bytearray(path.read_bytes())
    data[2000:2100] = bytes(100)
    path.write_bytes(bytes(data))
    member = NpzMember(str(path), "x")
    with pytest.raises(InputError, match="corrupt or truncated"):
        member.extract(str(tmp_path / "x.npy"))
    assert not (tmp_path / "x.npy").exists()
