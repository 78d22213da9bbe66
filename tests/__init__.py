"""trinity's test suite (a package, so `tests.*` never resolves to a `tests` package another distribution installed)."""
