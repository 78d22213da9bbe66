"""The `trinity` command line."""
