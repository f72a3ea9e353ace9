"""What a turn shows the editor: its events as ``session/update`` notifications, as they
happen and when a stored conversation is replayed (``session/load``).

===========================  =========================================================
mol event                    ACP update
===========================  =========================================================
``reasoning_delta``          ``agent_thought_chunk``
``text_delta``               ``agent_message_chunk``
``tool_call``                ``tool_call``, status ``pending`` (title, kind, the complete
                             arguments as ``rawInput``, the file of a file tool as its
                             location); a plan tool's call also a ``plan``
``approval`` (allowed)       ``tool_call_update``, status ``in_progress``
``tool_result``              ``tool_call_update``, ``completed`` or ``failed``, with the
                             result's text (a terminal's output fenced as code) after what
                             the tool attached (an editor's terminal, a diff)
``answer``                   the thought and message not streamed already (a replay has
                             no deltas: the answer carries them)
===========================  =========================================================

Every message chunk and tool call carries ``_meta.mol.adapter``: the adapter that
answered. Replay reads the turns' logs (``SessionStore.turn_logs``: the events a turn
logged, text deltas left out) through the same mapping, each turn after its user message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from mol.acpagent.sdk import CLIENT_METHODS
from mol.acpagent.text import fenced, title_text

TOOL_KINDS = {"read_file": "read", "list_dir": "read", "write_file": "edit",
              "edit_file": "edit", "terminal": "execute", "load_skill": "read",
              "read_skill_file": "read"}
"""ACP's tool kinds (icons in an editor) of the built-in tools; any other tool is ``other``."""
FILE_TOOLS = {"read_file": "Read", "write_file": "Write", "edit_file": "Edit",
              "list_dir": "List"}
"""The file tools, by the verb of their title; their ``path`` argument is their location."""
PLAN_TOOLS = ("update_plan", "TodoWrite", "todo_write")
"""Tools whose arguments are the model's plan (Codex's ``update_plan``: ``plan``, a list of
``{step, status}``; Claude Code's ``TodoWrite``: ``todos``, a list of ``{content,
status}``), from a plugin or an MCP server (``mcp__SERVER__update_plan``)."""
PLAN_STATUSES = ("pending", "in_progress", "completed")


def text_block(text: str) -> dict[str, Any]:
    """An ACP text content block."""
    return {"type": "text", "text": text}


def tool_content(text: str) -> dict[str, Any]:
    """Text as the content of a tool call."""
    return {"type": "content", "content": text_block(text)}


def arguments_of(raw: str) -> Any:
    """A call's arguments as sent (JSON text), parsed when they are a JSON object."""
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def bare_name(name: str) -> str:
    """A tool's own name, without an MCP server's ``mcp__SERVER__`` prefix."""
    return name.split("__", 2)[2] if name.startswith("mcp__") and name.count("__") >= 2 else name


def title(name: str, arguments: Any) -> str:
    """A short, printable line naming what the call does (the complete arguments travel
    beside it)."""
    args = arguments if isinstance(arguments, dict) else {}
    if name == "terminal" and isinstance(args.get("command"), str):
        return title_text(args["command"])
    if name in FILE_TOOLS:
        return title_text(f"{FILE_TOOLS[name]} {args.get('path', '.')}")
    if name.startswith("mcp__") and name.count("__") >= 2:
        _, server, tool = name.split("__", 2)
        return title_text(f"{tool} ({server})")
    return title_text(name)


def plan_entries(name: str, arguments: Any) -> list[dict[str, Any]] | None:
    """The plan a plan tool's call sets, as ACP plan entries; None for any other call."""
    if bare_name(name) not in PLAN_TOOLS or not isinstance(arguments, dict):
        return None
    items = arguments.get("plan") if "plan" in arguments else arguments.get("todos")
    if not isinstance(items, list):
        return None
    entries = []
    for item in items:
        if isinstance(item, dict):
            content = item.get("step", item.get("content"))
            status = item.get("status")
            priority = item.get("priority")
            entries.append({
                "content": str(content or ""),
                "priority": priority if priority in ("high", "medium", "low") else "medium",
                "status": status if status in PLAN_STATUSES else "pending"})
    return entries


class Updates:
    """A session's events as updates to the editor, one session at a time; an observer
    of the runtime session (``Updates(event)``)."""

    def __init__(self, peer: Any, session_id: str, locate: Callable[[str, str], str]) -> None:
        self.peer = peer
        self.session_id = session_id
        self.locate = locate
        """``locate(tool, path)``: where a file tool's ``path`` is, for the editor."""
        self.adapter = ""
        """The adapter answering (the last route decision)."""
        self.finish_reason = ""
        self._open: dict[str, list[dict[str, Any]]] = {}
        """Calls begun and not ended: the content their tools attached."""
        self._text = self._thought = False
        """Whether the current reply's text (thought) reached the editor as deltas."""

    def begin(self) -> None:
        """A new turn starts."""
        self.finish_reason = ""
        self._text = self._thought = False

    async def send(self, update: dict[str, Any]) -> None:
        """One ``session/update`` notification."""
        await self.peer.notify(CLIENT_METHODS["session_update"],
                               {"sessionId": self.session_id, "update": update})

    async def __call__(self, event: Any) -> None:
        await self.show(event.to_dict())

    async def show(self, data: dict[str, Any]) -> None:
        """Send what an event (as ``Event.to_dict()``) shows the editor, if anything."""
        handler = getattr(self, f"_on_{data.get('type')}", None)
        if handler is not None:
            await handler(data)

    def _meta(self) -> dict[str, Any]:
        return {"mol": {"adapter": self.adapter}}

    async def message(self, text: str, kind: str = "agent_message_chunk") -> None:
        """A chunk of the agent's message (or thought, or, replayed, the user's)."""
        update = {"sessionUpdate": kind, "content": text_block(text)}
        if kind != "user_message_chunk":
            update["_meta"] = self._meta()
        await self.send(update)

    async def _on_route(self, data: dict[str, Any]) -> None:
        self.adapter = data["adapter"]

    async def _on_reasoning_delta(self, data: dict[str, Any]) -> None:
        self._thought = True
        await self.message(data["text"], "agent_thought_chunk")

    async def _on_text_delta(self, data: dict[str, Any]) -> None:
        self._text = True
        await self.message(data["text"])

    async def _on_tool_call(self, data: dict[str, Any]) -> None:
        call_id, name = data["call_id"], data["name"]
        self._text = self._thought = False  # the next reply streams anew
        arguments = arguments_of(data["arguments"])
        self._open[call_id] = []
        await self.send({"sessionUpdate": "tool_call", **self.call_view(call_id, name, arguments),
                         "_meta": {"mol": {"adapter": data["adapter"], "tool": name}}})
        entries = plan_entries(name, arguments)
        if entries is not None:
            await self.send({"sessionUpdate": "plan", "entries": entries})

    def call_view(self, call_id: str, name: str, arguments: Any) -> dict[str, Any]:
        """A call as ACP shows it before it runs (a ``ToolCall``'s fields)."""
        view: dict[str, Any] = {"toolCallId": call_id, "title": title(name, arguments),
                                "kind": TOOL_KINDS.get(name, "other"), "status": "pending",
                                "rawInput": arguments}
        path = arguments.get("path", ".") if isinstance(arguments, dict) else None
        if name in FILE_TOOLS and isinstance(path, str):
            view["locations"] = [{"path": self.locate(name, path)}]
        return view

    async def _on_approval(self, data: dict[str, Any]) -> None:
        if data["allow"] and data["call_id"] in self._open:
            await self.send({"sessionUpdate": "tool_call_update", "toolCallId": data["call_id"],
                             "status": "in_progress"})

    async def attach(self, call_id: str, content: dict[str, Any],
                     locations: list[dict[str, Any]] | None = None) -> None:
        """Show ``content`` (an editor's terminal, a diff) with a running call, and keep it
        for the call's end."""
        attached = self._open.setdefault(call_id, [])
        attached.append(content)
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                                  "status": "in_progress", "content": list(attached)}
        if locations:
            update["locations"] = locations
        await self.send(update)

    async def _on_tool_result(self, data: dict[str, Any]) -> None:
        call_id = data["call_id"]
        text = data["content"]
        if data["name"] == "terminal" and text:
            text = fenced(text)
        content = [*self._open.pop(call_id, []), *([tool_content(text)] if text else [])]
        await self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                         "status": "failed" if data["is_error"] else "completed",
                         "content": content})

    async def _on_answer(self, data: dict[str, Any]) -> None:
        self.adapter = data.get("adapter") or self.adapter
        self.finish_reason = data.get("finish_reason", "")
        if data.get("reasoning") and not self._thought:
            await self.message(data["reasoning"], "agent_thought_chunk")
        if data.get("text") and not self._text:
            await self.message(data["text"])

    async def end_open(self, why: str) -> None:
        """End the calls begun and not ended (the turn was cancelled, or failed) as failed,
        saying ``why``."""
        for call_id, attached in list(self._open.items()):
            await self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                             "status": "failed", "content": [*attached, tool_content(why)]})
        self._open.clear()

    async def replay(self, turns: Iterable[Any], logs: Iterable[dict[str, Any]]) -> None:
        """A stored conversation's turns, each as its user message and what it logged."""
        events = {log["index"]: log.get("events") or [] for log in logs}
        for record in turns:
            self.begin()
            if record.user:
                await self.message(record.user, "user_message_chunk")
            logged = events.get(record.index)
            if logged is None:  # nothing logged: what the record kept
                logged = [{"type": "answer", "adapter": record.adapter, "text": record.answer}]
            for data in logged:
                await self.show(data)
            if record.status == "interrupted":
                await self.end_open("interrupted")


def stop_reason(stopped: str, finish_reason: str) -> str:
    """ACP's stop reason for a finished turn: why the loop stopped (``max_steps``,
    ``token_budget``, ``prompt_blocked``), else the engine's finish reason."""
    reasons = {"max_steps": "max_turn_requests", "token_budget": "max_tokens",
               "prompt_blocked": "refusal"}
    if stopped in reasons:
        return reasons[stopped]
    return "max_tokens" if finish_reason == "length" else "end_turn"
