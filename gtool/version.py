"""The gtool version, one place for the package, the CLI and store metadata."""

__version__ = "0.1.0"
