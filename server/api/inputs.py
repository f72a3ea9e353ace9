"""Responses request bodies: ``tools`` and ``input`` items in mol's plain message form.

- **Tools.** ``function`` entries become Chat Completions tools. A ``namespace`` entry
  (function tools grouped under a name, as Codex sends them) is flattened: its functions
  become client tools of their own (named ``namespace__name`` only where a name would
  clash), and their calls go back to the client with the namespace it expects. Hosted
  tool types mol cannot run (``web_search``, ``file_search``, ``code_interpreter``, ...)
  are left out of what the model sees, named in a log line and in the response's
  ``metadata``; never a 400.
- **Input items.** Messages (``user``, ``system``, ``developer``, ``assistant``; content a
  string or text parts), ``function_call`` (merged into the assistant message before it)
  and ``function_call_output`` (``output`` a string or content parts); an
  ``mcp_approval_request`` mol sent is the call it asks about (merged likewise), and an
  ``mcp_approval_response`` that call's result: the person's decision as JSON
  (``mol.server.turns.approvals``), ``always`` being mol's own field beside OpenAI's
  ``approve`` and ``reason``. ``reasoning`` and the items of hosted tools (approval items
  too, when their ids are not mol's) are skipped (each adapter keeps its own view). Every
  problem is a 400 naming the field (``input[3].call_id``).
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from mol.runtime import adapter_of_call
from mol.server.api.messages import MAX_MESSAGES, bounded, normalize, text_of
from mol.server.http.bodies import field, json_kind
from mol.server.http.errors import ApiError

log = logging.getLogger("mol.server")

SKIPPED_ITEMS = frozenset({
    "reasoning", "web_search_call", "file_search_call", "code_interpreter_call",
    "image_generation_call", "computer_call", "computer_call_output", "mcp_list_tools",
    "mcp_call", "mol.genui"})
"""Input items mol reads past: earlier thoughts, what hosted tools did, mol's own UI items."""

APPROVAL_ITEMS = {"mcp_approval_request": "id", "mcp_approval_response": "approval_request_id"}
"""The approval items, and the field of each naming the call (a mol call id when mol asked)."""
PART_TEXT = ("text", "input_text", "output_text")


@dataclass
class ClientTools:
    """A Responses request's ``tools`` as the model sees them."""

    tools: list[dict[str, Any]] | None = None
    """Chat Completions ``tools`` entries (None: the request has no ``tools``)."""
    namespaced: dict[str, tuple[str, str]] = dataclass_field(default_factory=dict)
    """Flat name -> (namespace, name as the client knows it)."""
    left_out: list[str] = dataclass_field(default_factory=list)
    """Hosted tool types mol cannot run, left out of what the model sees."""

    def flat(self, namespace: str | None, name: str) -> str:
        """The name the model knows a client function by."""
        if namespace is None:
            return name
        for flat, known in self.namespaced.items():
            if known == (namespace, name):
                return flat
        return name

    def call_fields(self, flat: str) -> dict[str, str]:
        """``name`` (and ``namespace``) of a call to ``flat`` as the client expects them."""
        if flat in self.namespaced:
            namespace, name = self.namespaced[flat]
            return {"name": name, "namespace": namespace}
        return {"name": flat}


def responses_tools(body: dict[str, Any]) -> ClientTools:
    """The request's ``tools``: functions, flattened namespaces; hosted tools left out."""
    raw = field(body, "tools", list)
    if raw is None:
        return ClientTools()
    out = ClientTools(tools=[])
    entries = [(f"tools[{i}]", _tool_type(t, f"tools[{i}]"), t)
               for i, t in enumerate(bounded(raw, "tools"))]
    taken = {field(t, "name", str, required=True, where=f"{w}.")
             for w, kind, t in entries if kind == "function"}
    for where, kind, tool in entries:
        if kind == "function":
            out.tools.append(_function(tool, where, tool["name"]))
        elif kind == "namespace":
            _flatten(tool, where, taken, out)
        elif kind not in out.left_out:
            out.left_out.append(kind)
    if out.left_out:
        log.info("responses: left out hosted tools mol cannot run: %s",
                 ", ".join(out.left_out))
    return out


def _tool_type(tool: Any, where: str) -> str:
    if not isinstance(tool, dict):
        raise ApiError(400, f"'{where}' must be an object", param=where)
    return field(tool, "type", str, required=True, where=f"{where}.")


def _function(tool: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "parameters": field(
        tool, "parameters", dict, where=f"{where}.") or {"type": "object"}}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _flatten(tool: dict[str, Any], where: str, taken: set[str], out: ClientTools) -> None:
    """A namespace's functions as client tools (``namespace__name`` where a name is taken)."""
    namespace = field(tool, "name", str, required=True, where=f"{where}.")
    inner = bounded(field(tool, "tools", list, required=True, where=f"{where}."),
                    f"{where}.tools")
    for j, entry in enumerate(inner):
        spot = f"{where}.tools[{j}]"
        kind = _tool_type(entry, spot)
        if kind != "function":
            if kind not in out.left_out:
                out.left_out.append(kind)
            continue
        name = field(entry, "name", str, required=True, where=f"{spot}.")
        flat = name if name not in taken else f"{namespace}__{name}"
        if flat in taken:
            raise ApiError(400, f"'{spot}.name' {name!r} of namespace {namespace!r} clashes "
                           "with another tool", param=f"{spot}.name")
        taken.add(flat)
        out.namespaced[flat] = (namespace, name)
        description = entry.get("description")
        if isinstance(tool.get("description"), str) and isinstance(description, str):
            entry = {**entry, "description": f"{description} ({namespace}: "
                                             f"{tool['description']})"}
        out.tools.append(_function(entry, spot, flat))


def input_messages(body: dict[str, Any], tools: ClientTools | None = None
                   ) -> tuple[list[dict[str, Any]], list[str]]:
    """``input`` (text or items) as chat-shaped messages, and per message the field its
    call id came from (for errors about tool results: ``input[3].call_id``)."""
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}], ["input"]
    if not isinstance(raw, list):
        raise ApiError(400, "'input' must be a string or an array of items", param="input")
    return item_messages(bounded(raw, "input", MAX_MESSAGES), tools or ClientTools(), "input")


def item_messages(items: list[Any], tools: ClientTools, where: str
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """Responses items (``input``, or a response's ``output``) as chat-shaped messages."""
    messages: list[dict[str, Any]] = []
    fields: list[str] = []
    for i, item in enumerate(items):
        spot = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"'{spot}' must be an object", param=spot)
        kind = item.get("type", "message")
        if kind in APPROVAL_ITEMS and not _ours(item, kind):
            continue  # a hosted MCP tool's, from another server's conversation
        if kind == "message":
            messages.append(normalize({"role": item.get("role"),
                                       "content": _content(item.get("content"), spot)}, spot))
            fields.append(spot)
        elif kind in ("function_call", "mcp_approval_request"):
            call = (_call(item, spot, tools) if kind == "function_call"
                    else _approval_call(item, spot))
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
                fields.append(spot)
        elif kind == "function_call_output":
            messages.append({"role": "tool", "content": tool_output(item.get("output"),
                                                                    f"{spot}.output"),
                             "tool_call_id": field(item, "call_id", str, required=True,
                                                   where=f"{spot}.")})
            fields.append(f"{spot}.call_id")
        elif kind == "mcp_approval_response":
            messages.append({"role": "tool", "content": approval_decision(item, spot),
                             "tool_call_id": field(item, "approval_request_id", str,
                                                   required=True, where=f"{spot}.")})
            fields.append(f"{spot}.approval_request_id")
        elif kind not in SKIPPED_ITEMS:
            raise ApiError(400, f"'{spot}.type' {kind!r} is not supported; use message, "
                           "function_call, function_call_output, mcp_approval_response or "
                           "reasoning", param=f"{spot}.type")
    return messages, fields


def _content(content: Any, where: str) -> Any:
    """Message content with ``refusal`` parts read as text (an assistant output replayed)."""
    if not isinstance(content, list):
        return content
    return [{"type": "output_text", "text": part.get("refusal")}
            if isinstance(part, dict) and part.get("type") == "refusal" else part
            for part in content]


def _call(item: dict[str, Any], where: str, tools: ClientTools) -> dict[str, Any]:
    name = field(item, "name", str, required=True, where=f"{where}.")
    namespace = field(item, "namespace", str, where=f"{where}.")
    return {"id": field(item, "call_id", str, required=True, where=f"{where}."),
            "type": "function",
            "function": {"name": tools.flat(namespace, name),
                         "arguments": field(item, "arguments", str, default="",
                                            where=f"{where}.")}}


def _ours(item: dict[str, Any], kind: str) -> bool:
    """Whether an approval item is about a call mol issued (its id says so)."""
    call_id = item.get(APPROVAL_ITEMS[kind])
    return not isinstance(call_id, str) or adapter_of_call(call_id) is not None


def _approval_call(item: dict[str, Any], where: str) -> dict[str, Any]:
    """The call an ``mcp_approval_request`` asks about, as the assistant made it."""
    return {"id": field(item, "id", str, required=True, where=f"{where}."), "type": "function",
            "function": {"name": field(item, "name", str, required=True, where=f"{where}."),
                         "arguments": field(item, "arguments", str, default="",
                                            where=f"{where}.")}}


def approval_decision(item: dict[str, Any], where: str) -> str:
    """An ``mcp_approval_response``'s decision as the JSON the turn room reads (the one a
    ``mol_approval`` result carries): ``approve``, and ``reason`` and ``always`` when
    given."""
    decision = {"approve": field(item, "approve", bool, required=True, where=f"{where}.")}
    for name, kind in (("reason", str), ("always", bool)):
        value = field(item, name, kind, where=f"{where}.")
        if value is not None:
            decision[name] = value
    return json.dumps(decision, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_output(output: Any, where: str) -> str:
    """A ``function_call_output.output``: a string, or content parts (text kept, other
    parts named by a placeholder: the adapters read text)."""
    if isinstance(output, str):
        return output
    if not isinstance(output, list):
        raise ApiError(400, f"'{where}' must be a string or an array of content parts, got "
                       f"{json_kind(output)}", param=where)
    texts = []
    for j, part in enumerate(bounded(output, where)):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ApiError(400, f"'{where}[{j}]' must be a content part with a type",
                           param=f"{where}[{j}]")
        if part["type"] in PART_TEXT:
            texts.append(text_of([part], f"{where}[{j}]"))
        else:
            texts.append(f"[{part['type']} omitted: mol reads text]")
    return "".join(texts)


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's ``input`` as stored items, each with an id
    (``GET /v1/responses/{id}/input_items``)."""
    raw = body.get("input")
    items = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) \
        else [dict(item) for item in raw or [] if isinstance(item, dict)]
    for item in items:
        kind = item.setdefault("type", "message")
        if kind == "message":
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            if isinstance(item.get("content"), str):
                item["content"] = [{"type": part, "text": item["content"]}]
            item.setdefault("status", "completed")
        prefix = {"message": "msg", "function_call": "fc", "function_call_output": "fco",
                  "mcp_approval_response": "mcpr"}.get(kind, "item")
        item.setdefault("id", f"{prefix}_{secrets.token_hex(12)}")
    return items
