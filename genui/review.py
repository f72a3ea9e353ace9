"""The GenUI checks of one turn: repair rounds for UI in answers, and the ``render_ui`` tool.

The agent loop asks ``Review.answer`` about every answer without tool calls. An
answer holding UI is checked; while it has problems and repair rounds remain,
the problems go back to the model as a user message headed ``[mol genui check]``
and the loop asks again (the failed answer and the feedback stay in the view:
it only ever grows). ``render_ui`` calls are checked the same way, their result
being the verdict. Every check emits a ``GenUIChecked`` event; the last one of
the turn is what the client is told.

When the toolchain is missing the UI is not checked: an ``error`` event says to
run ``mol genui setup`` and the answer goes out as it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mol.core import events as ev
from mol.core.errors import GenUIError
from mol.core.tools import Tool, ToolContext, ToolResult
from mol.genui.extract import Block, blocks, tool_blocks
from mol.genui.report import Checked
from mol.hcp.schema import GenUIConfig

FEEDBACK_HEADER = "[mol genui check]"
TOOL_DESCRIPTION = (
    "Show the user a generated UI and get it checked. Pass either `code`, one complete UI4A "
    "TSX module with a default-exported component, or `a2ui`, a list of A2UI messages. The "
    "result says whether the UI is valid, or lists its problems (with line and column, or "
    "message line and JSON pointer) to fix before calling again.")
TOOL_PARAMETERS = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "A complete UI4A TSX module: imports from "
                 "react and $ui4a/*, and `export default function App() {...}`."},
        "a2ui": {"description": "A2UI messages (createSurface, updateComponents, "
                 "updateDataModel, deleteSurface), as a list or as JSON lines in one string.",
                 "anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "string"}]},
    },
    "additionalProperties": False,
}


class Review:
    """The checks of one turn of one adapter, and the repair rounds they have used."""

    def __init__(self, adapter: str, config: GenUIConfig,
                 emit: Callable[[ev.Event], Awaitable[None]]) -> None:
        self.adapter = adapter
        self.rounds = config.repair_rounds
        self.emit = emit
        self.attempt = 0
        """Checks so far that sent problems back for repair."""

    async def answer(self, text: str) -> str | None:
        """Feedback for the model when the answer's UI has problems and a round is left;
        None to accept the answer (no UI, valid UI, or no round left)."""
        found = blocks(text)
        checked = await self._check(found, "answer") if found else None
        if checked is None or await self._verdict(checked):
            return None
        return (f"{FEEDBACK_HEADER} The UI in your last answer has problems:\n"
                f"{_problems(checked)}\nAnswer again with the whole corrected UI "
                f"({self._left()} left).")

    async def render(self, arguments: dict[str, Any]) -> ToolResult:
        """The ``render_ui`` tool: check the UI in its arguments; the result is the verdict."""
        try:
            found = tool_blocks(arguments)
        except ValueError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)
        checked = await self._check(found, "render_ui")
        if checked is None:
            return ToolResult("Error: the UI could not be checked, so it was not shown (the "
                              "runtime's GenUI toolchain is missing).", is_error=True)
        final = await self._verdict(checked)
        if all(c.valid for c in checked):
            return ToolResult("valid: the UI is shown to the user.")
        if final:
            return ToolResult(f"invalid, and no repair round is left: the UI is reported "
                              f"invalid.\n{_problems(checked)}", is_error=True)
        return ToolResult(f"invalid: fix these problems and call render_ui again "
                          f"({self._left()} left).\n{_problems(checked)}", is_error=True)

    def tool(self) -> Tool:
        """The ``render_ui`` tool bound to this turn's checks."""

        async def call(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
            return await self.render(arguments)

        return Tool("render_ui", TOOL_DESCRIPTION, TOOL_PARAMETERS, call, source="genui",
                    validate=lambda arguments: arguments)

    async def _check(self, found: list[Block], origin: str) -> list[Checked] | None:
        from mol.genui.checker import check_blocks

        try:
            return await check_blocks(found, origin)
        except GenUIError as exc:
            await self.emit(ev.Failed("genui", f"the UI was not checked: {exc}"))
            return None

    async def _verdict(self, checked: list[Checked]) -> bool:
        """Emit the check's event; True when its verdict is final (valid, or no round left)."""
        valid = all(c.valid for c in checked)
        final = valid or self.attempt >= self.rounds
        await self.emit(ev.GenUIChecked(self.adapter, self.attempt, valid, final,
                                        [c.to_dict() for c in checked]))
        if not final:
            self.attempt += 1
        return final

    def _left(self) -> str:
        left = self.rounds - self.attempt + 1
        return f"{left} repair round{'s' if left != 1 else ''}"


def _problems(checked: list[Checked]) -> str:
    parts = []
    for item in checked:
        if not item.valid:
            label = "A2UI stream" if item.kind == "a2ui" else "UI4A TSX module"
            parts.append(f"{label}:\n{item.summary()}")
    return "\n".join(parts)
