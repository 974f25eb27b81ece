"""Options of a sharding run, each declared once (gtool.options): `gtool shard`'s flags, their help and
their checks are made from these declarations."""

from __future__ import annotations

from dataclasses import dataclass, field

from gtool.geometry.grid import parse_dims
from gtool.options import Options, option
from gtool.store.choices import NORMALIZATIONS, PERMUTATION_SCHEMES
from gtool.units import byte_count


def square_tiles(text: str, flag: str) -> int:
    """'16x16' (or '16') -> 16; the store layout holds T x T tiles."""
    rows, cols = parse_dims(text, 2, flag)
    if rows != cols:
        raise ValueError(f"{flag} must be square (T x T, store layout v1), got {text}")
    return rows


@dataclass(frozen=True)
class ShardOptions(Options):
    """Everything that controls how a source becomes a store; bad values are refused when it is made."""

    tiles: int = option(
        16,
        "Tile grid T x T.",
        short="-t",
        minimum=1,
        parse=square_tiles,
        metavar="TxT",
        shown_default="16x16",
    )
    directed: bool = option(False, "Keep direction: rows aggregate incoming edges.")
    norm: str = option("sym", "sym: D^-1/2 (A+I) D^-1/2; none: A+I.", choices=NORMALIZATIONS)
    perm: str = option(
        "double",
        "Permutation: double, single, none, or balanced (degree-aware: equal nonzeros per band).",
        choices=PERMUTATION_SCHEMES,
    )
    seed: int = option(0, "Seed of permutations and generated node data.", minimum=0)
    num_nodes: int | None = option(
        None,
        "Node count of an edge file (isolated nodes too).",
        minimum=1,
        shown_default="the largest id + 1",
    )
    features: str | None = option(
        None,
        "Node features .npy/.npz, or a scipy CSR .npz (may be larger than RAM).",
        metavar="FILE",
        nonblank=True,
        shown_default="the source's, else random",
    )
    labels: str | None = option(
        None, "Node labels .npy/.npz/.txt (-1: unlabelled).", metavar="FILE", nonblank=True
    )
    split: str | None = option(
        None,
        "Split per node: codes (0 train, 1 valid, 2 test, -1 none) or words (train, valid, test, none) "
        "in a .npy or a text file (one per line), or index sets train/valid/test in an .npz.",
        metavar="FILE",
        nonblank=True,
    )
    num_features: int = option(128, "Random features when the source has none.", minimum=1)
    num_classes: int | None = option(
        None,
        "The labels' class count (labels are checked against it; without it, the largest label + 1, "
        "refused when implausibly large); with no labels, how many degree-quantile classes to make.",
        minimum=1,
        shown_default="32 without labels",
    )
    root: str | None = option(
        None,
        "Where named datasets are kept.",
        metavar="DIR",
        nonblank=True,
        shown_default="$GTOOL_DATA, else ./data",
    )
    memory_limit: int | None = option(
        None,
        "Peak memory of the whole run, e.g. 2GB.",
        positive=True,
        parse=byte_count,
        metavar="SIZE",
        shown_default="half of this machine",
    )
    workers: int | None = option(
        None,
        "Workers of the local cluster (1: in this process; more: worker processes).",
        short="-w",
        minimum=1,
        shown_default="cores",
    )
    scheduler: str | None = option(
        None, "Address of an existing dask.distributed scheduler.", metavar="ADDRESS", nonblank=True
    )
    worker_timeout: float = option(
        60.0,
        "Seconds without a heartbeat after which a Dask worker is named, restarted and its tasks run "
        "elsewhere.",
        positive=True,
        metavar="SECONDS",
    )
    dashboard: bool = option(False, "Run the local cluster's Dask dashboard.")
    spill_dir: str | None = option(
        None,
        "Folder for intermediate files, on a file system (shared by every worker with --scheduler).",
        metavar="DIR",
        nonblank=True,
        shown_default="beside STORE",
    )
    cache_dir: str | None = option(
        None,
        "Where decompressed copies of compressed inputs (deflated .npz members, .gz text, OGB CSV) are kept "
        "for later runs; `gtool cache list` shows them, `gtool cache clear` removes them.",
        metavar="DIR",
        nonblank=True,
        shown_default="$GTOOL_CACHE, else ROOT/gtool-cache",
    )
    no_cache: bool = option(False, "Decompress into the spill folder instead (removed at the end).")
    overwrite: bool = option(
        False, "Replace an existing gtool store (or empty folder); nothing else is replaced."
    )
    chunk_edges: int | None = field(default=None)
    """Edges per map task, overriding what the memory budget gives (tests; no flag)."""
    progress: bool = field(default=False)
    """Progress bars (`gtool shard` shows them unless -q)."""
