"""`gtool predict`: a checkpoint's full-graph forward pass on any grid, written in the original node order."""
