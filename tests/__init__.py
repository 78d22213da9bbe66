"""The test suite (a regular package, so that `tests` here wins over a `tests` package another distribution installs, such as verl 0.9.1)."""
