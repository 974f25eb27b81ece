"""`gtool stats`: how evenly a store spreads nonzeros over tiles and over the ranks of a 3D grid.

tiles     per-tile and per-band figures of each stored matrix
grid      each rank's shard nonzeros per layer and what it reads
compare   the tile nonzeros every permutation scheme would give, counted from the stored tiles
report    everything `gtool stats` reports, from at most two tile scans
plot      heatmaps of tile nonzeros (PNG)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gtool.faces import face

if TYPE_CHECKING:
    from gtool.stats.plot import plot_tile_nnz
    from gtool.stats.report import GridPlan, StartScan, collect_stats

__getattr__, __dir__ = face(__name__)
