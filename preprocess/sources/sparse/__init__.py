"""Sparse-matrix .npz layouts: scipy.sparse save_npz files and the GNN-benchmark collections."""
