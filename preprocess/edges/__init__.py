"""The edges' map-reduce: map edge chunks into partitions of tiles, then sort, dedupe and write each tile."""
