"""Training data for one adapter from a stored session (``mol sessions export``).

A stored session keeps each adapter's view, and a view only grows at its end, so every
answer step of the adapter is the view up to that assistant message, as the engine saw it:
after a compaction, its system prompt, the compaction's summary and the messages the
compaction kept (``Conversation.engine_view`` at that point). The tools are those the
HCP offers the adapter now (a session does not store them; a server client's own tools
are not known), and the messages and tools go through the engine client's
``wire_body`` as an eval export's do. Route examples need the route request, which a
session does not keep: they come from eval runs only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from mol.eval.exports import examples as ex
from mol.eval.exports.sft import checked_adapter
from mol.eval.exports.source import out_file


def view_steps(conversation: Any, adapter: str) -> list[list[dict[str, Any]]]:
    """The messages of each answer step of ``adapter`` (its assistant messages, each after
    what the engine saw before it)."""
    from mol.runtime import Conversation

    view = conversation.views.get(adapter) or []
    done = conversation.compactions.get(adapter) or []
    steps = []
    for index, message in enumerate(view):
        if message.get("role") != "assistant":
            continue
        # The compactions made before this message decide what the engine saw of the view.
        before = [c for c in done if c["at"] <= index]
        then = Conversation(views={adapter: view[:index + 1]},
                            compactions={adapter: before} if before else {})
        steps.append(then.engine_view(adapter))
    return steps


async def export_session(store: Any, session_id: str, artifact: Any, adapter: str,
                         out: Path, dedup: bool = True) -> dict[str, Any]:
    """Write the examples of ``adapter`` in the stored session, and the manifest."""
    from mol.runtime import LiteLLMEngine, open_runtime

    checked_adapter(artifact, adapter)
    out_file(out)
    conversation = await store.load(session_id)
    async with open_runtime(artifact) as runtime:
        tools = await runtime.tools_for(adapter)
    specs = [tools[name].spec() for name in sorted(tools)] or None
    engine = LiteLLMEngine.from_artifact(artifact)

    def shaped() -> list[ex.Example]:  # blocking: litellm loads, then shapes each step
        return [ex.Example(body["messages"], body.get("tools"),
                           {"kind": "answer", "session": session_id, "step": number})
                for number, messages in enumerate(view_steps(conversation, adapter), start=1)
                for body in [engine.wire_body(adapter, messages, tools=specs)]]

    found = await anyio.to_thread.run_sync(shaped)
    source = {"kind": "session", "store": store.location, "session": session_id,
              "hcp_name": artifact.name, "hcp_digest": artifact.digest}
    return ex.write(out, found, adapter=adapter, source=source, filters={"dedup": dedup},
                    counts={"turns": len(conversation.turns)})
