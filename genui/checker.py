"""Checking UI blocks and files: A2UI through the official schemas, TSX through Node.

``check_blocks`` is what the repair rounds and the ``render_ui`` tool call;
``check_file`` is ``mol genui check`` and ``mol genui preview``. Both need the
toolchain (``GenUISetupError`` names ``mol genui setup`` when it is missing).
"""

from __future__ import annotations

from pathlib import Path

import anyio

from mol.core.errors import UsageError
from mol.genui import toolchain
from mol.genui.extract import Block, blocks
from mol.genui.report import Checked

SUFFIXES = {".tsx": "tsx", ".jsonl": "a2ui", ".json": "a2ui"}
"""File kinds ``mol genui check`` knows by suffix; any other file is read as an answer."""


async def check_blocks(found: list[Block], origin: str = "answer") -> list[Checked]:
    """One ``Checked`` for all the A2UI blocks (one stream), one per TSX block, in the order
    of their first block."""
    from mol.genui.a2ui import check_stream
    from mol.genui.a2ui.schemas import load
    from mol.genui.tsx import check_tsx

    chain = toolchain.find()
    results: list[tuple[int, Checked]] = []
    streams = [b for b in found if b.kind == "a2ui"]
    if streams:
        schemas = load(chain.a2ui_schemas(), chain.a2ui_renderer())
        pieces = [(b.text, b.first_line) for b in streams]
        checked = await anyio.to_thread.run_sync(
            lambda: check_stream(pieces, schemas, origin=origin))
        results.append((streams[0].first_line, checked))
    for block in found:
        if block.kind == "tsx":
            results.append((block.first_line, await check_tsx(
                block.text, chain, first_line=block.first_line, origin=origin)))
    return [checked for _, checked in sorted(results, key=lambda pair: pair[0])]


async def check_file(path: Path) -> list[Checked]:
    """The UIs of a file: a ``.tsx`` module, ``.jsonl`` / ``.json`` A2UI messages, or an
    answer (Markdown with fenced blocks) from which the blocks are taken."""
    try:
        text = await anyio.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it: {exc}") from None
    kind = SUFFIXES.get(path.suffix.lower())
    found = [Block(kind, text)] if kind else blocks(text)  # type: ignore[arg-type]
    if not found:
        raise UsageError(f"{path}: no UI in it: expected a .tsx module, A2UI JSON lines, or an "
                         "answer with a ```ui4a/tsx or ```a2ui block")
    return await check_blocks(found, origin="file")
