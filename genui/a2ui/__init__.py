"""A2UI (Agent-to-UI, a2ui.org) streams: ``check_a2ui`` validates one against the official
JSON Schemas of the version it declares and runs the catalog checks (``surfaces``)."""

from mol.genui.a2ui.check import check_a2ui, check_stream, parse

__all__ = ["check_a2ui", "check_stream", "parse"]
