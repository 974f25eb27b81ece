"""Models built from the 3D-parallel blocks, and their plain serial twins that the tests compare them with."""
