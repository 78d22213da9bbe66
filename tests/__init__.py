"""The test suite. A regular package on purpose: verl 0.9.1 installs a top-level `tests` package, which would shadow a namespace `tests`."""
