"""MCP servers declared in the HCP, as tools, resources and prompts.

``MCPManager`` (``manager``) owns every server of a session; ``connection``
runs one connection; ``sdk`` is the only module that imports the ``mcp`` SDK;
``process`` owns stdio server processes; ``naming`` and ``results`` are the
pure parts (tool names and pins, the text a model reads of a result).
"""

from mol.runtime.mcp.manager import MCPManager, ServerStatus

__all__ = ["MCPManager", "ServerStatus"]
