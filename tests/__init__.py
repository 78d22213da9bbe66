"""The test suite (a package, so `tests.conftest` is ours: verl installs a top-level `tests` package too)."""
