"""The ground floor of mol: what every folder may import, importing nothing of mol.

``errors`` (the one ``MolError`` tree), ``events`` (the typed events of a turn),
``tools`` (the one ``Tool`` shape), ``schemas`` (JSON Schema checks of tool arguments),
``deadlines``, ``owner`` (a process identified across pid reuse and reboots) and the
version.
"""

__version__ = "0.1.0"
