"""``python -m mol.cli`` runs the ``mol`` CLI."""

from mol.cli.main import main

raise SystemExit(main())
