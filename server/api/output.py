"""The output items of one streamed Responses reply as they open, grow and close, each
change an event: reasoning items (one per run of reasoning), compaction items, the message,
then the client's function calls and the approval requests (``ResponseReply`` renders each
item)."""

from __future__ import annotations

import secrets
from typing import Any

from mol.core import events as ev


class OutputStream:
    """The output items of one streamed response as they open, grow and close: reasoning
    items (one per run of reasoning), the message, then the client's function calls."""

    def __init__(self, reply: Any) -> None:
        """``reply``: the ``ResponseReply`` whose items and events these are."""
        self.reply = reply
        self.items: list[dict[str, Any]] = []
        """Output items in ``output_index`` order (completed ones in their final form)."""
        self.text: list[str] = []
        self.message_index: int | None = None
        self.thought: tuple[int, list[str]] | None = None
        """The open reasoning item: its index and its text so far."""
        self.compacting: int | None = None
        """The index of the compaction item being written."""

    def output(self) -> list[dict[str, Any]]:
        """The completed output items."""
        return list(self.items)

    def compaction(self, event: ev.Compacting | ev.Compacted) -> list[bytes]:
        """A view compacted: its ``compaction`` item opens with
        ``response.compaction.compacting``, and is done once the compaction is."""
        reply = self.reply
        if isinstance(event, ev.Compacting):
            index, added = self._open(reply.compaction_item(done=False))
            self.compacting = index
            return [added, reply.event("response.compaction.compacting",
                                       item_id=self.items[index]["id"], output_index=index)]
        index, self.compacting = self.compacting, None
        pieces = []
        if index is None:  # no Compacting before it: open it now
            index, added = self._open(reply.compaction_item(done=False))
            pieces.append(added)
        self.items[index] = done = reply.compaction_item(self.items[index]["id"])
        return [*pieces, reply.event("response.output_item.done", output_index=index,
                                     item=done)]

    def _open(self, item: dict[str, Any]) -> tuple[int, bytes]:
        self.items.append(item)
        index = len(self.items) - 1
        return index, self.reply.event("response.output_item.added", output_index=index,
                                       item=item)

    def reasoning(self, delta: str) -> list[bytes]:
        pieces = []
        if self.thought is None:
            index, added = self._open(self.reply.reasoning_item(
                "rs_" + secrets.token_hex(12), "", "in_progress"))
            self.thought, pieces = (index, []), [added]
        index, parts = self.thought
        parts.append(delta)
        pieces.append(self.reply.event("response.reasoning_text.delta",
                                       item_id=self.items[index]["id"], output_index=index,
                                       content_index=0, delta=delta))
        return pieces

    def _close_reasoning(self) -> list[bytes]:
        if self.thought is None:
            return []
        index, parts = self.thought
        self.thought = None
        item_id, text = self.items[index]["id"], "".join(parts)
        self.items[index] = done = self.reply.reasoning_item(item_id, text)
        return [self.reply.event("response.reasoning_text.done", item_id=item_id,
                                 output_index=index, content_index=0, text=text),
                self.reply.event("response.output_item.done", output_index=index, item=done)]

    def text_delta(self, delta: str) -> list[bytes]:
        reply, pieces = self.reply, self._close_reasoning()
        if self.message_index is None:
            self.message_index, added = self._open(reply.message_item("", "in_progress"))
            part = {"type": "output_text", "text": "", "annotations": []}
            pieces += [added, reply.event("response.content_part.added",
                                          item_id=reply.message_id,
                                          output_index=self.message_index, content_index=0,
                                          part=part)]
        self.text.append(delta)
        pieces.append(reply.event("response.output_text.delta", item_id=reply.message_id,
                                  output_index=self.message_index, content_index=0,
                                  delta=delta, logprobs=[]))
        return pieces

    def close(self, outcome: ev.Answered | ev.ClientToolsRequested) -> list[bytes]:
        reply, pieces = self.reply, self._close_reasoning()
        if self.message_index is not None:
            index, text = self.message_index, "".join(self.text)
            part = {"type": "output_text", "text": text, "annotations": []}
            self.items[index] = done = reply.message_item(text)
            pieces += [
                reply.event("response.output_text.done", item_id=reply.message_id,
                            output_index=index, content_index=0, text=text, logprobs=[]),
                reply.event("response.content_part.done", item_id=reply.message_id,
                            output_index=index, content_index=0, part=part),
                reply.event("response.output_item.done", output_index=index, item=done)]
        calls = outcome.calls if isinstance(outcome, ev.ClientToolsRequested) else []
        for item in reply.genui_items() if isinstance(outcome, ev.Answered) else []:
            index, added = self._open(item)
            pieces += [added, reply.event("response.output_item.done", output_index=index,
                                          item=item)]
        for call in calls:
            done = reply.call_item(call)
            index, added = self._open(reply.call_item(call, "", "in_progress"))
            self.items[index] = done
            pieces += [
                added,
                reply.event("response.function_call_arguments.delta", item_id=done["id"],
                            output_index=index, delta=done["arguments"]),
                reply.event("response.function_call_arguments.done", item_id=done["id"],
                            output_index=index, arguments=done["arguments"],
                            name=done["name"]),
                reply.event("response.output_item.done", output_index=index, item=done)]
        for asked in outcome.asked if isinstance(outcome, ev.ClientToolsRequested) else []:
            item = reply.approval_item(asked)
            index, added = self._open(item)
            pieces += [added, reply.event("response.output_item.done", output_index=index,
                                          item=item)]
        return pieces
