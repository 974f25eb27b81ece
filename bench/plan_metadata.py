"""A store of metadata only, for `gtool plan` on a graph that is not at hand (docs/plan.md's example).

    python -m bench.plan_metadata papers100m-like.zarr --nodes 111059956 --edges 1615685872 \
        --features 128 --classes 172 --tiles 16

The plan reads a store's sizes and per-tile nonzero counts, never its tiles. This writes a Zarr group
whose metadata describes a symmetrized, normalized, double-permuted graph of --edges undirected edges
(each stored in both directions, plus a self-loop per node) spread over the T x T tiles the way double
permutation spreads them: every tile near the mean (a seeded +-1% jitter; the counts add up exactly).
Its node arrays have their shapes but no chunks, it has no tiles, and its source says so: `gtool train`
on it fails at the first tile it reads.
"""

from __future__ import annotations

import argparse
import datetime

import numpy as np
import zarr

from gtool.geometry.tiles import tile_size
from gtool.store import layout
from gtool.store.metadata import LabelsInfo, MatrixStats, PermutationInfo, StoreMeta
from gtool.version import __version__

JITTER = 0.01


def spread_over_tiles(nnz: int, tiles: int, seed: int = 0) -> np.ndarray:
    """`nnz` nonzeros over T x T tiles, each near nnz / T^2, adding up to `nnz` exactly."""
    weights = 1 + JITTER * np.random.default_rng(seed).uniform(-1, 1, (tiles, tiles))
    counts = np.floor(nnz * weights / weights.sum()).astype(np.int64)
    counts.flat[: nnz - int(counts.sum())] += 1
    return counts


def metadata_only(nodes: int, edges: int, features: int, classes: int, tiles: int) -> StoreMeta:
    """The metadata of a symmetrized graph of `edges` undirected edges on `nodes` nodes (A0 = A1)."""
    nnz = 2 * edges + nodes
    counts = spread_over_tiles(nnz, tiles)
    stats = MatrixStats.of(counts)
    return StoreMeta(
        num_nodes=nodes,
        num_features=features,
        num_classes=classes,
        nnz={0: nnz, 1: nnz},
        tiles=tiles,
        tile_size=tile_size(nodes, tiles),
        normalization="sym",
        graph="symmetrized",
        permutation=PermutationInfo("double", 0),
        source={"name": "metadata only (bench.plan_metadata): for gtool plan, no arrays", "edges": edges},
        labels=LabelsInfo("none: metadata only"),
        split_origin="none: metadata only",
        features_origin="none: metadata only",
        created_by=f"gtool {__version__}",
        created_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        stats={0: stats, 1: MatrixStats.of(counts.T.copy())},
    )


def write_metadata_store(path: str, meta: StoreMeta) -> None:
    """A store of `meta` whose node arrays have their shapes and no chunks (nothing written), and no tiles."""
    group = zarr.open_group(path, mode="w")
    n = meta.num_nodes
    shapes = {layout.PERM_ROWS: (n,), layout.PERM_COLS: (n,), layout.FEATURES: (n, meta.num_features)}
    shapes |= {path: (n,) for path in (*layout.SPLIT.values(), *layout.LABELS.values())}
    for name, shape in shapes.items():
        dtype = layout.NODE_DTYPES[name]
        group.create_array(name, shape=shape, dtype=dtype, chunks=(min(n, 1 << 20), *shape[1:]))
    for matrix in meta.matrices:
        group.create_group(f"adj/{matrix}")
    group.attrs[layout.META_KEY] = meta.to_dict()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("output", help="The store to write (a folder).")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--edges", type=int, required=True, help="Undirected edges (each stored twice).")
    parser.add_argument("--features", type=int, required=True)
    parser.add_argument("--classes", type=int, required=True)
    parser.add_argument("--tiles", type=int, default=16, help="T of the T x T tiling.")
    args = parser.parse_args(argv)
    meta = metadata_only(args.nodes, args.edges, args.features, args.classes, args.tiles)
    write_metadata_store(args.output, meta)
    print(f"wrote {args.output}: metadata only, {args.nodes:,} nodes, {meta.nnz[0]:,} nonzeros per matrix")


if __name__ == "__main__":
    main()
