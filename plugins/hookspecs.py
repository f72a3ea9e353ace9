"""The plugin surface: a few hooks, all named ``mol_*``, called with keyword arguments.

Hooks may return awaitables; mol awaits them. Built-in tools register through
the same hooks as third-party plugins.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("mol")


@hookspec
def mol_register_tools(register: Any) -> None:
    """Register tools by calling ``register(tool)`` for each one.

    ``tool`` is a ``mol.core.tools.Tool`` or a plain typed function (sync or
    async) with a docstring; its JSON Schema is derived from its signature.
    ``register(func, name="other_name")`` renames it. A name registered twice
    is an error naming both plugins.
    """


@hookspec
def mol_before_tool_call(call: Any, context: Any) -> Any:
    """Inspect a tool call before it runs; may block it or rewrite its arguments.

    ``call`` is a ``mol.runtime.hooks.ToolCallInfo`` (``name``, ``arguments``),
    ``context`` a ``mol.core.tools.ToolContext``. Return ``None`` to let it
    run, ``mol.runtime.hooks.Block(reason)`` to refuse it (the model reads the
    reason), or ``mol.runtime.hooks.Rewrite(arguments)`` to replace the
    arguments. An awaitable of any of these works too. A hook that raises blocks
    the call (the error is logged with the plugin's name).
    """


@hookspec
def mol_after_tool_call(call: Any, result: Any, context: Any) -> Any:
    """See a tool call's result (``mol.core.tools.ToolResult``) after it ran.

    Return ``None`` to keep the result, or a ``ToolResult`` (or string) to
    replace what the model reads. A hook that raises withholds the result.
    """


@hookspec
def mol_before_compaction(adapter: str, trigger: str, instructions: str, context: Any) -> Any:
    """An adapter's view is about to be compacted (``trigger``: ``manual`` or ``auto``;
    ``instructions``: what the asker added; ``context``: a ``mol.core.tools.ToolContext``).

    Return ``None`` to let it happen, ``mol.runtime.hooks.Block(reason)`` to keep the view as
    it is, or a string: more instructions for the compaction's summary.
    """


@hookspec
def mol_after_compaction(adapter: str, trigger: str, before: int, after: int,
                         context: Any) -> None:
    """An adapter's view was compacted from about ``before`` tokens to ``after``."""
