"""The `gtool` command line."""
