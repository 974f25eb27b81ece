"""Text graph formats: edge lists and Matrix Market, parsed in byte-range chunks."""
