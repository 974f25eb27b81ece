"""The node arrays in their permuted orders: features by sequential passes, labels, splits and degrees."""
