"""Stores stay byte for byte what gtool wrote before features were permuted by sequential passes: every
file but the root's attributes (which hold the creation time) hashes to the digest pinned here."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.support.stores import make_store

pytestmark = pytest.mark.integration  # builds stores

N = 1003


def store_digest(path: str) -> str:
    """sha256 over the relative path and bytes of every file but the root zarr.json."""
    root, digest = Path(path), hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p != root / "zarr.json":
            digest.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return digest.hexdigest()


def inputs(folder: Path) -> dict[str, str]:
    """Edges, dense and CSR features, labels and a split made by formula (no random generator)."""
    k = np.arange(4 * N, dtype=np.int64)
    edges = np.stack([(k * 7919) % N, (k * 104729 + 13) % (N - 3)])
    dense = (((np.arange(N * 6) * 2654435761) % 1000003) / 997.0 - 500.0).reshape(N, 6)
    sparse = sp.csr_matrix(np.where(dense > 200, dense, 0.0))
    files = {
        "edges": folder / "edges.npy",
        "features": folder / "x.npy",
        "csr": folder / "x_csr.npz",
        "labels": folder / "y.npy",
        "split": folder / "split.npy",
    }
    np.save(files["edges"], edges)
    np.save(files["features"], dense)
    sp.save_npz(files["csr"], sparse)
    np.save(files["labels"], np.arange(N) % 5)
    np.save(files["split"], (np.arange(N) % 4 - 1).astype(np.int8))
    return {name: str(path) for name, path in files.items()}


CASES = {
    "dense features, labels, split; double": (
        dict(features="features", labels="labels", split="split", tiles=3, workers=1),
        "7ee428ba075822fcfc72cdcc6d9774a1c0160beefa4df6449c46d2432fe4e428",
    ),
    "CSR features; balanced, directed, no normalization, 2 workers": (
        dict(features="csr", tiles=2, perm="balanced", directed=True, norm="none", workers=2),
        "ce6ce6ecb60ee5523a8885802a83984bb36bff48063f5d7579aa7a791f1acd17",
    ),
    "dense features; single, 3 workers, small chunks": (
        dict(features="features", tiles=4, perm="single", workers=3, chunk_edges=500),
        "de86016d7f90acef9fa8db2abcd77e0010dfed4138416d5f68ac951062a3de12",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_store_bytes_are_unchanged(tmp_path, case):
    files = inputs(tmp_path)
    options, digest = CASES[case]
    options = {k: files[v] if k in ("features", "labels", "split") else v for k, v in options.items()}
    store = make_store(files["edges"], tmp_path / "s.zarr", num_nodes=N, memory_limit=2 << 30, **options)
    assert store_digest(store) == digest
