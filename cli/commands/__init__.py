"""Implementations of the ``mol`` subcommands, one module each, imported lazily."""
