"""One rank's training: the step and the epoch, the optimizer, resuming and checkpointing, what it reports."""
