"""`python -m workbench`: opens the workbench; subcommands do headless work (see cli.py)."""

from workbench.cli import main

raise SystemExit(main())
