"""``python -m mol.runtime`` runs the ``mol`` CLI."""

from mol.runtime.cli import main

raise SystemExit(main())
