"""Anthropic Messages request bodies in mol's plain message form, checked field by field.

- **The conversation.** ``system`` (a string or text blocks) is a system message first.
  Each of ``messages`` becomes chat-shaped messages: a ``user`` message's text blocks one
  user message, its ``tool_result`` blocks one ``tool`` message each (content a string or
  blocks; text kept, other blocks named by a placeholder; ``is_error`` marks the content);
  text blocks beside tool results are appended to the last result, so the results still
  answer the waiting turn. An ``assistant`` message's text and ``tool_use`` blocks become
  one message with tool calls; ``thinking`` blocks mol signed are checked and dropped (each
  adapter keeps its own view), ``redacted_thinking`` blocks and the blocks of Anthropic's
  server tools are dropped. A ``system`` message (Claude Code sends them mid-conversation)
  stays where it is, but those after the new turn are appended to it (the turn is one
  text). Images and documents are refused: mol's adapters read text.
- **Tools**: tools with an ``input_schema`` become client functions, deferred ones
  (``defer_loading``, which Anthropic's tool search would reveal) too: mol runs no tool
  search, so the model sees them all; tools Anthropic defines (its server tools such as
  ``web_search_*``, and those whose schema it keeps, such as ``bash_*``) are left out of
  what the model sees and named.
- **Parameters**: ``max_tokens`` (required), ``stop_sequences``, ``temperature``, ``top_p``,
  ``top_k``, ``tool_choice`` and ``thinking`` for the answer hop.

Every problem is a 400 naming the field (``messages[2].content[1].tool_use_id``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from mol.server.api.anthropic.thinking import Signer
from mol.server.api.messages import MAX_MESSAGES, bounded, role_of
from mol.server.http.bodies import field, json_kind
from mol.server.http.errors import ApiError

ROLES = ("user", "assistant", "system")
TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
"""Anthropic's ``tool_choice.type`` -> Chat Completions' (``tool`` names a function)."""
THINKING = ("enabled", "disabled", "adaptive")
DROPPED = ("redacted_thinking", "server_tool_use", "mcp_tool_use", "container_upload")
"""Assistant blocks read past besides ``thinking``, and those ending in ``_tool_result``
(what Anthropic's server tools did)."""


@dataclass
class Conversation:
    """A request's ``system`` and ``messages``, chat-shaped."""

    messages: list[dict[str, Any]]
    """As the client sent them: the transcript whose fingerprint names a point."""
    fields: list[str]
    """Per message, the request field of its call id (or the message), for errors."""
    turn: list[dict[str, Any]]
    """``messages`` with the system messages after the new turn appended to it."""


@dataclass
class Tools:
    """A request's ``tools`` as the model sees them."""

    tools: list[dict[str, Any]] | None = None
    """Chat Completions ``tools`` entries (None: the request has no ``tools``)."""
    left_out: list[str] = dataclass_field(default_factory=list)
    """Anthropic-defined tool types left out (``web_search_20250305``, ...)."""


def conversation(body: dict[str, Any], signer: Signer) -> Conversation:
    """``system`` and ``messages`` as chat-shaped messages (see the module docstring)."""
    messages: list[dict[str, Any]] = []
    fields: list[str] = []
    system = _text(body.get("system"), "system") if body.get("system") is not None else ""
    if system:
        messages.append({"role": "system", "content": system})
        fields.append("system")
    raw = bounded(field(body, "messages", list, required=True), "messages", MAX_MESSAGES)
    if not raw:
        raise ApiError(400, "'messages' must not be empty", param="messages")
    for i, message in enumerate(raw):
        out, spots = _message(message, f"messages[{i}]", signer)
        messages += out
        fields += spots
    return Conversation(messages, fields, _folded(messages))


def _folded(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """System messages after the last user message or tool result appended to it."""
    end = len(messages)
    while end > 0 and messages[end - 1]["role"] == "system":
        end -= 1
    if end in (0, len(messages)) or messages[end - 1]["role"] not in ("user", "tool"):
        return messages
    extra = "\n\n".join(m["content"] for m in messages[end:] if m["content"])
    last = messages[end - 1]
    return [*messages[:end - 1], {**last, "content": f"{last['content']}\n\n{extra}"}]


def _message(raw: Any, where: str, signer: Signer) -> tuple[list[dict[str, Any]], list[str]]:
    role = role_of(raw, where, ROLES)
    content = raw.get("content")
    if role == "system" or isinstance(content, str):
        return [{"role": role, "content": _text(content, f"{where}.content")}], [where]
    blocks = _blocks(content, f"{where}.content")
    if role == "assistant":
        return [_assistant(blocks, f"{where}.content", signer)], [where]
    return _user(blocks, where)


def _blocks(content: Any, where: str) -> list[tuple[str, str, dict[str, Any]]]:
    """``(field, type, block)`` of a content array, each checked to be a typed object."""
    if not isinstance(content, list):
        raise ApiError(400, f"'{where}' must be a string or an array of content blocks, got "
                       f"{json_kind(content)}", param=where)
    out = []
    for j, block in enumerate(bounded(content, where)):
        spot = f"{where}[{j}]"
        if not isinstance(block, dict):
            raise ApiError(400, f"'{spot}' must be an object", param=spot)
        out.append((spot, field(block, "type", str, required=True, where=f"{spot}."), block))
    return out


def _user(blocks: list[tuple[str, str, dict[str, Any]]], where: str
          ) -> tuple[list[dict[str, Any]], list[str]]:
    texts: list[str] = []
    results: list[dict[str, Any]] = []
    spots: list[str] = []
    for spot, kind, block in blocks:
        if kind == "text":
            texts.append(field(block, "text", str, required=True, where=f"{spot}."))
        elif kind == "tool_result":
            content = _result(block.get("content"), f"{spot}.content")
            if field(block, "is_error", bool, default=False, where=f"{spot}."):
                content = f"[error] {content}"
            results.append({"role": "tool", "content": content, "tool_call_id": field(
                block, "tool_use_id", str, required=True, where=f"{spot}.")})
            spots.append(f"{spot}.tool_use_id")
        else:
            raise _unsupported(spot, kind, "text and tool_result")
    if not results:
        return [{"role": "user", "content": "".join(texts)}], [where]
    if texts:  # beside results: the client's words go with them, to the waiting turn
        results[-1]["content"] += "\n\n" + "".join(texts)
    return results, spots


def _assistant(blocks: list[tuple[str, str, dict[str, Any]]], where: str,
               signer: Signer) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for spot, kind, block in blocks:
        if kind == "text":
            texts.append(field(block, "text", str, required=True, where=f"{spot}."))
        elif kind == "tool_use":
            arguments = field(block, "input", dict, default={}, where=f"{spot}.")
            calls.append({"id": field(block, "id", str, required=True, where=f"{spot}."),
                          "type": "function", "function": {
                              "name": field(block, "name", str, required=True,
                                            where=f"{spot}."),
                              "arguments": json.dumps(arguments, ensure_ascii=False)}})
        elif kind == "thinking":
            thinking = field(block, "thinking", str, required=True, where=f"{spot}.")
            signature = field(block, "signature", str, required=True, where=f"{spot}.")
            if not signer.verify(thinking, signature):
                raise ApiError(400, f"'{spot}.signature' does not match its thinking: this "
                               "server did not issue the block, or it was changed; send "
                               "thinking blocks back unchanged, or leave them out",
                               param=f"{spot}.signature")
        elif kind not in DROPPED and not kind.endswith("_tool_result"):
            raise _unsupported(spot, kind, "text, tool_use, thinking and redacted_thinking")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def _text(content: Any, where: str) -> str:
    """A string, or the text of an array of text blocks (``cache_control`` ignored)."""
    if isinstance(content, str):
        return content
    texts = []
    for spot, kind, block in _blocks(content, where):
        if kind != "text":
            raise _unsupported(spot, kind, "text")
        texts.append(field(block, "text", str, required=True, where=f"{spot}."))
    return "\n".join(texts)


def _result(content: Any, where: str) -> str:
    """A ``tool_result``'s content: a string, or blocks (text kept, others named)."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for spot, kind, block in _blocks(content, where):
        if kind == "text":
            parts.append(field(block, "text", str, required=True, where=f"{spot}."))
        elif kind == "tool_reference":  # a tool search's find: the tool is offered now
            parts.append(f"[tool found: {field(block, 'tool_name', str, required=True, where=f'{spot}.')}]")
        else:
            parts.append(f"[{kind} omitted: mol reads text]")
    return "".join(parts)


def _unsupported(spot: str, kind: str, supported: str) -> ApiError:
    why = ("mol's adapters read text only" if kind in ("image", "document")
           else f"mol takes {supported} blocks here")
    return ApiError(400, f"'{spot}.type' {kind!r} is not supported: {why}",
                    param=f"{spot}.type")


def message_tools(body: dict[str, Any]) -> Tools:
    """The request's ``tools``: client tools as functions; the others left out."""
    raw = field(body, "tools", list)
    if raw is None:
        return Tools()
    out = Tools(tools=[])
    for i, tool in enumerate(bounded(raw, "tools")):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise ApiError(400, f"'{where}' must be an object", param=where)
        kind = field(tool, "type", str, where=f"{where}.")
        if kind not in (None, "custom"):  # Anthropic defines it: its schema is not here
            if kind not in out.left_out:
                out.left_out.append(kind)
            continue
        name = field(tool, "name", str, required=True, where=f"{where}.")
        function: dict[str, Any] = {
            "name": name, "parameters": field(tool, "input_schema", dict, required=True,
                                              where=f"{where}.")}
        description = field(tool, "description", str, where=f"{where}.")
        if description is not None:
            function["description"] = description
        out.tools.append({"type": "function", "function": function})
    return out


@dataclass
class Options:
    """The request's parameters for the answer hop, and how thinking is shown."""

    params: dict[str, Any]
    """Chat Completions terms (``mol.server.api.params``), ``extra_body`` included."""
    show_thinking: bool = True
    """False with ``thinking.display = "omitted"``: thinking blocks come without text."""


def message_options(body: dict[str, Any], thinking_off: dict[str, Any]) -> Options:
    """``max_tokens`` (required), sampling, stop sequences, ``tool_choice`` and ``thinking``
    (``disabled`` sends the engine's ``thinking_off`` fields), each checked."""
    budget = field(body, "max_tokens", int, required=True)
    if budget < 1:
        raise ApiError(400, f"'max_tokens' must be at least 1, got {budget}",
                       param="max_tokens")
    extra: dict[str, Any] = {}
    top_k = field(body, "top_k", int)
    if top_k is not None:
        if top_k < 1:
            raise ApiError(400, f"'top_k' must be at least 1, got {top_k}", param="top_k")
        extra["top_k"] = top_k
    field(body, "metadata", dict)
    thinking = field(body, "thinking", dict, default={})
    kind = field(thinking, "type", str, required=bool(thinking), where="thinking.")
    if kind is not None and kind not in THINKING:
        raise ApiError(400, f"'thinking.type' must be one of {', '.join(THINKING)}, got "
                       f"{kind!r}", param="thinking.type")
    if kind == "enabled":
        field(thinking, "budget_tokens", int, required=True, where="thinking.")
    if kind == "disabled":
        extra.update(thinking_off)
    choice, parallel = _tool_choice(body)
    params = {"max_tokens": budget, "temperature": _unit(body, "temperature", 0, 1),
              "top_p": _unit(body, "top_p", 0, 1, above=True), "stop": _stops(body),
              "tool_choice": choice, "parallel_tool_calls": parallel,
              "extra_body": extra or None}
    return Options({k: v for k, v in params.items() if v is not None},
                   field(thinking, "display", str, where="thinking.") != "omitted")


def _unit(body: dict[str, Any], name: str, low: float, high: float,
          above: bool = False) -> float | None:
    value = field(body, name, (int, float))
    if value is not None and not (low < value <= high if above else low <= value <= high):
        raise ApiError(400, f"'{name}' must be {'above' if above else 'at least'} {low} and "
                       f"at most {high}, got {value}", param=name)
    return value


def _stops(body: dict[str, Any]) -> list[str] | None:
    stops = field(body, "stop_sequences", list)
    if stops is not None and not all(isinstance(s, str) for s in bounded(stops,
                                                                        "stop_sequences")):
        raise ApiError(400, "'stop_sequences' must be an array of strings",
                       param="stop_sequences")
    return stops or None


def _tool_choice(body: dict[str, Any]) -> tuple[Any, bool | None]:
    """Anthropic's ``tool_choice`` in Chat Completions terms, and ``parallel_tool_calls``."""
    choice = field(body, "tool_choice", dict)
    if choice is None:
        return None, None
    kind = field(choice, "type", str, required=True, where="tool_choice.")
    parallel = False if field(choice, "disable_parallel_tool_use", bool,
                              where="tool_choice.") else None
    if kind == "tool":
        name = field(choice, "name", str, required=True, where="tool_choice.")
        return {"type": "function", "function": {"name": name}}, parallel
    if kind not in TOOL_CHOICES:
        raise ApiError(400, f"'tool_choice.type' must be one of auto, any, tool, none; got "
                       f"{kind!r}", param="tool_choice.type")
    return TOOL_CHOICES[kind], parallel
