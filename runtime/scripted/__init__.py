"""The scripted engine's parts: the script format, request reading, answers and the ASGI app.

The public entry point is ``mol.runtime.testing.ScriptedEngine``.
"""
