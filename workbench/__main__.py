"""`python -m workbench`: opens the workbench; subcommands do headless work (see cli/main.py)."""

from workbench.cli.main import main

raise SystemExit(main())
