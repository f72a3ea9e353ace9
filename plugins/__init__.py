"""mol's plugin system (pluggy). Third-party plugins import the marker from here::

    from mol.plugins import hookimpl

    @hookimpl
    def mol_register_tools(register):
        register(my_function)
"""

import pluggy

hookimpl = pluggy.HookimplMarker("mol")
"""Marks a plugin's implementation of a ``mol_*`` hook."""

__all__ = ["hookimpl"]
