"""Starting the ranks of a run: from torchrun's or srun's environment, in this process, or spawned locally."""
