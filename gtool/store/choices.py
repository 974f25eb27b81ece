"""The values a store's normalization and permutation scheme may take (light: option declarations use
them without loading the store's libraries)."""

NORMALIZATIONS = ("sym", "none")
PERMUTATION_SCHEMES = ("double", "single", "none", "balanced")
"""How pr and pc were made (`permutation.scheme`; gtool.preprocess.permutation makes them)."""
