"""Sharded checkpoints: written by the training ranks, read back by a run of any grid."""
