"""mol's runtime: the engine boundary, the agent loop, the runtime and its sessions, MCP,
session stores and the engines mol ships (scripted, local)."""
