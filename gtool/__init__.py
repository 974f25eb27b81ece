"""gtool: out-of-core 2D-tiled graph stores and 3D-parallel GCN training.

    store = gtool.open_store("graph.zarr")       # metadata, tiles, node arrays (docs/python.md)
    adjacency = gtool.to_scipy(store)            # back in original node order
    report = gtool.verify_store(store)           # checksums and invariants, as `gtool verify`

The core every room shares: the store format (gtool.store), the index geometry (gtool.geometry), errors
and the version. Its names load their modules on first use, so importing gtool loads no heavy library.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from gtool.errors import DamagedChunkError, GtoolError, InputError, StoreError
from gtool.version import __version__

_LAZY = {
    "Store": "gtool.store.reader",
    "TileData": "gtool.store.reader",
    "open_store": "gtool.store.reader",
    "VerifyReport": "gtool.store.verify",
    "verify_store": "gtool.store.verify",
    "to_scipy": "gtool.store.convert",
    "to_pyg": "gtool.store.convert",
    "features": "gtool.store.convert",
    "labels": "gtool.store.convert",
    "split": "gtool.store.convert",
}


def __getattr__(name: str) -> Any:
    """The store API, imported when first asked for (zarr and numpy load then, not with gtool)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'gtool' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DamagedChunkError",
    "GtoolError",
    "InputError",
    "StoreError",
    "__version__",
    *_LAZY,
]
