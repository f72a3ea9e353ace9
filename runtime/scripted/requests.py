"""Reading a Chat Completions request: body validation, the routing constraint, the last text.

Anything malformed becomes an ``HTTPProblem`` whose message names the field at
fault; the app answers it as an OpenAI-shaped error.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ROLES = ("assistant", "developer", "function", "system", "tool", "user")
CONSTRAINT_FIELDS = ("structured_outputs", "guided_choice", "regex", "grammar")
STRUCTURED_KINDS = ("choice", "regex", "grammar")
_LITERAL = r'"((?:[^"\\\n]|\\.)*)"'
_ROOT_RULE = re.compile(rf"\s*root\s*::=\s*({_LITERAL}(?:\s*\|\s*{_LITERAL})*)\s*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class HTTPProblem(Exception):
    """An error answer: HTTP status, message and OpenAI error type."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind or _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")

    def body(self) -> dict[str, Any]:
        """The OpenAI error JSON shape."""
        return {"error": {"message": self.message, "type": self.kind, "param": None, "code": self.status}}


_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                429: "rate_limit_error"}


@dataclass(frozen=True)
class Constraint:
    """A routing constraint: the reply must be one of ``choices`` or fully match ``pattern``."""

    kind: str
    """Where it came from: ``structured_outputs.choice``, ``guided_choice``, ``regex``, ``grammar``..."""
    choices: tuple[str, ...] | None = None
    pattern: re.Pattern[str] | None = None

    def allows(self, text: str) -> bool:
        """Whether a constrained engine could produce ``text``."""
        if self.choices is not None:
            return text in self.choices
        return self.pattern is not None and self.pattern.fullmatch(text) is not None

    def describe(self) -> str:
        """The allowed set in words, for error messages."""
        if self.choices is not None:
            return f"one of {', '.join(map(repr, self.choices))}"
        return f"a full match of the regex {self.pattern.pattern!r}" if self.pattern else "nothing"

    def to_json(self) -> dict[str, Any]:
        """The constraint as recorded in the request log."""
        allowed: Any = list(self.choices) if self.choices is not None else None
        return {"kind": self.kind, "choices": allowed, "regex": self.pattern and self.pattern.pattern}


@dataclass(frozen=True)
class ChatRequest:
    """What the scripted engine needs from a validated request body."""

    body: dict[str, Any]
    adapter: str
    text: str
    """The last message's text: the content string, or its concatenated text parts (for a
    prefill request, the text of the message before the prefill)."""
    stream: bool
    include_usage: bool
    constraint: Constraint | None
    thinking: bool = True
    """False when the request switches thinking off (``chat_template_kwargs.enable_thinking``)."""
    prefill: str | None = None
    """The assistant message the engine continues (``continue_final_message``), if any."""
    system: str = ""
    """The system prompt: the texts of the system and developer messages, one per line."""

    @property
    def key(self) -> str:
        """A digest of what the request asks (its body without the streaming options): the
        identity stochastic rules draw for."""
        body = {k: v for k, v in self.body.items() if k not in ("stream", "stream_options")}
        data = json.dumps(body, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(data).hexdigest()


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON object in a request body."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HTTPProblem(400, f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise HTTPProblem(400, f"request body must be a JSON object, got {_kind(body)}")
    return body


def read_request(body: dict[str, Any], adapters: Sequence[str] | Mapping[str, str]) -> ChatRequest:
    """Validate a chat completion body; resolve its adapter (``adapters``: the script's, or
    each served model name -> the adapter whose rules answer it); extract text and
    constraint."""
    model = body.get("model")
    if not isinstance(model, str):
        raise HTTPProblem(400, f"'model' must be a string, got {_kind(model)}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise HTTPProblem(400, f"'messages' must be a non-empty array, got {_kind(messages)}")
    texts = [_message_text(i, message) for i, message in enumerate(messages)]
    stream = _optional(body, "stream", bool, False)
    options = _optional(body, "stream_options", dict, {})
    include_usage = _optional(options, "include_usage", bool, False, "stream_options.include_usage")
    template = _optional(body, "chat_template_kwargs", dict, {})
    thinking = _optional(template, "enable_thinking", bool, True,
                         "chat_template_kwargs.enable_thinking")
    prefill = read_prefill(body)
    text = texts[-2] if prefill is not None and len(texts) > 1 else texts[-1]
    system = "\n".join(text for text, message in zip(texts, messages, strict=True)
                       if message.get("role") in ("system", "developer"))
    return ChatRequest(body, resolve_adapter(model, adapters), text, stream, include_usage,
                       read_constraint(body), thinking, prefill, system)


def read_prefill(body: dict[str, Any]) -> str | None:
    """The assistant prefill a ``continue_final_message`` request asks the engine to continue;
    a 400 where vLLM would refuse the request (both flags on, or no assistant message last)."""
    if not _optional(body, "continue_final_message", bool, False):
        _optional(body, "add_generation_prompt", bool, True)
        return None
    if _optional(body, "add_generation_prompt", bool, True):
        raise HTTPProblem(400, "Cannot set both `continue_final_message` and "
                          "`add_generation_prompt` to True (add_generation_prompt defaults to "
                          "true: send it as false)")
    last = body["messages"][-1]
    if last.get("role") != "assistant":
        raise HTTPProblem(400, "continue_final_message needs the last message to be the "
                          f"assistant message to continue, got role {last.get('role')!r}")
    return _message_text(len(body["messages"]) - 1, last)


def served_name(model: str, adapters: Sequence[str] | Mapping[str, str]) -> str:
    """The served model a model id names, with any ``provider/`` prefixes stripped; vLLM's 404
    for a model it does not serve (a LoRA never loaded, or unloaded)."""
    name = model
    while name not in adapters and "/" in name:
        name = name.split("/", 1)[1]
    if name not in adapters:
        raise HTTPProblem(404, f"The model `{model}` does not exist.", "NotFoundError")
    return name


def resolve_adapter(model: str, adapters: Sequence[str] | Mapping[str, str]) -> str:
    """The adapter whose rules answer a model id (``provider/`` prefixes stripped)."""
    name = served_name(model, adapters)
    return adapters[name] if isinstance(adapters, Mapping) else name


def read_constraint(body: dict[str, Any]) -> Constraint | None:
    """The routing constraint a request carries (vLLM, SGLang or llama.cpp style), if any."""
    found = [key for key in CONSTRAINT_FIELDS if body.get(key) is not None]
    if len(found) > 1:
        raise HTTPProblem(400, f"a request may carry one routing constraint, got {', '.join(found)}")
    if not found:
        return None
    key = found[0]
    value = body[key]
    if key == "structured_outputs":
        if not isinstance(value, dict):
            raise HTTPProblem(400, f"'structured_outputs' must be an object, got {_kind(value)}")
        kinds = [k for k in value if value[k] is not None]
        unsupported = [k for k in kinds if k not in STRUCTURED_KINDS]
        if unsupported or len(kinds) != 1:
            raise HTTPProblem(400, "'structured_outputs' must hold exactly one of "
                              f"{', '.join(STRUCTURED_KINDS)} (the scripted engine's kinds), got "
                              f"{', '.join(map(repr, kinds)) or 'none'}")
        inner = kinds[0]
        return _constraint(f"structured_outputs.{inner}", inner, value[inner])
    return _constraint(key, "choice" if key == "guided_choice" else key, value)


def _constraint(where: str, kind: str, value: Any) -> Constraint:
    if kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise HTTPProblem(400, f"'{where}' must be a non-empty array of strings, got {_kind(value)}")
        return Constraint(where, choices=tuple(value))
    if not isinstance(value, str):
        raise HTTPProblem(400, f"'{where}' must be a string, got {_kind(value)}")
    if kind == "grammar":
        return Constraint(where, choices=grammar_choices(value, where))
    try:
        return Constraint(where, pattern=re.compile(value))
    except re.error as exc:
        raise HTTPProblem(400, f"'{where}' is not a valid regular expression: {exc}") from exc


def grammar_choices(grammar: str, where: str = "grammar") -> tuple[str, ...]:
    """The literals of a GBNF grammar whose root is quoted alternatives: ``root ::= "L0" | "L1"``."""
    lines = [line for line in grammar.splitlines() if not line.lstrip().startswith("#")]
    match = _ROOT_RULE.fullmatch("\n".join(lines))
    if match is None:
        raise HTTPProblem(400, f"'{where}': the scripted engine understands only a root rule of "
                          f'quoted literal alternatives (root ::= "L0" | "L1"), got {grammar!r}')
    literals = re.findall(_LITERAL, match.group(1))
    return tuple(re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), text) for text in literals)


def _message_text(index: int, message: Any) -> str:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise HTTPProblem(400, f"{where} must be an object, got {_kind(message)}")
    role = message.get("role")
    if role not in ROLES:
        raise HTTPProblem(400, f"{where}.role must be one of {', '.join(ROLES)}; got {role!r}")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise HTTPProblem(400, f"{where}.content must be a string, an array of parts or null; "
                          f"got {_kind(content)}")
    texts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise HTTPProblem(400, f"{where}.content[{i}] must be an object with a string 'type'")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                raise HTTPProblem(400, f"{where}.content[{i}].text must be a string")
            texts.append(part["text"])
    return "".join(texts)


def _optional(body: dict, key: str, kind: type, default: Any, name: str | None = None) -> Any:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise HTTPProblem(400, f"'{name or key}' must be {_kind(kind())}, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    """A value's type in JSON words, for error messages."""
    names = {bool: "a boolean", str: "a string", int: "a number", float: "a number",
             list: "an array", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)
