"""mol's runtime: the harness, engine boundary, tools, sessions, server and CLI."""

__version__ = "0.1.0"
