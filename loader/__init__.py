"""Per-rank loading: each rank reads only the tiles and node rows its shards overlap."""
