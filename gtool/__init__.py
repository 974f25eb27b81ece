"""gtool: out-of-core 2D-tiled graph stores and 3D-parallel GCN training."""

from gtool.version import __version__

__all__ = ["__version__"]
