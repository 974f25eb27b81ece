"""3D-parallel GCN training (Plexus) over torch.distributed."""
