"""Per-rank loading: each rank reads only the tiles and node rows its shards overlap, as
gtool.geometry.layers.rank_geometry (shared with `gtool stats`) says; `load_layer_shard`,
`load_feature_block` and `load_label_rows` read one piece each (the Python API's blocks).

    data = load_rank("graph.zarr", grid=(2, 2, 2), rank=3, layers=3)
    data.shard(0).matrix      # A0[band x, band y] as torch sparse CSR (padded), .transpose its transpose
    data.features             # X[pc][band y, feature band z], float32, zero-padded
    data.labels, data.split   # the last layer's row band, in its order (pr if L is odd, else pc)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gtool.faces import face

if TYPE_CHECKING:
    from gtool.loader.csr import csr_tensor
    from gtool.loader.load import (
        load_feature_block,
        load_label_rows,
        load_layer_shard,
        load_rank,
        read_feature_rows,
        read_node_ids,
        read_positions,
    )
    from gtool.loader.rank_data import AdjacencyShard, RankData, ReadStats

__getattr__, __dir__ = face(__name__)
