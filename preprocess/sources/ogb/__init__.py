"""OGB node-property datasets in OGB's on-disk layout (CSV or binary raw form)."""
