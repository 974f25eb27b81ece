"""gtool: out-of-core 2D-tiled graph stores and 3D-parallel GCN training.

    import gtool
    store = gtool.open_store("graph.zarr")       # metadata, tiles, node arrays (docs/python.md)
    adjacency = store.to_scipy()                 # back in original node order
    report = gtool.verify_store(store)           # checksums and invariants, as `gtool verify`

Per-rank loading for 3D-parallel training: gtool.loader.load_rank. Importing gtool before torch puts large
CPU tensors on transparent huge pages (gtool.hugepages).
"""

from gtool.errors import DamagedChunkError, GtoolError, InputError, StoreError
from gtool.hugepages import enable_huge_pages
from gtool.store import Store, TileData, open_store
from gtool.verify import VerifyReport, verify_store
from gtool.version import __version__

enable_huge_pages()

__all__ = [
    "DamagedChunkError",
    "GtoolError",
    "InputError",
    "Store",
    "StoreError",
    "TileData",
    "VerifyReport",
    "__version__",
    "open_store",
    "verify_store",
]
