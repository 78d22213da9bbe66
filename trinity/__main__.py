"""`python -m trinity` is the `trinity` command."""

from trinity.cli.main import main

raise SystemExit(main())
