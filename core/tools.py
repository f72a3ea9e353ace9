"""One ``Tool`` shape for every source: plugins, MCP servers and built-ins.

A tool has a name, a description, the JSON Schema of its arguments and an
async ``call``. A plain typed Python function (sync or async) with a docstring
becomes a tool through ``function_tool``: its JSON Schema is derived from the
signature by pydantic, and arguments are validated before it runs.

Tool *failures* are never exceptions to the caller: ``run_tool`` turns invalid
arguments and exceptions raised by the tool into a ``ToolResult`` with
``is_error=True`` whose text the model reads (the message, no traceback).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol, get_type_hints

import anyio

from mol.core.errors import ToolError

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Names engines accept for functions (OpenAI: letters, digits, ``_`` and ``-``, 64 at most)."""
ELICIT_ACTIONS = ("accept", "decline", "cancel")
"""The actions of an MCP ``ElicitResult`` (the SDK's ``Literal``; tests/runtime/mcp checks
they agree), what ``ToolContext.elicit`` answers with."""


@dataclass(frozen=True)
class Approval:
    """A person's answer to a call of an ``ask`` tool (``[tools] ask``)."""

    allow: bool
    always: bool = False
    """The answer holds for every later call of the tool in this conversation (allow
    always, reject always), remembered with it (``Conversation.approvals``)."""
    reason: str = ""
    """Why, in the person's words; a refusal's reaches the adapter."""


class Later:
    """What an approver answers when the person answers after the turn (``mol serve``'s API
    clients): the call stays open, the turn ends waiting for the answer (remembered with
    the conversation, ``Conversation.asked``), and the answer resumes it
    (``Session.submit_tool_results(approvals=...)``). ``LATER`` is the one instance."""

    def __repr__(self) -> str:
        return "LATER"


LATER = Later()


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: the text the model reads, and whether it is an error."""

    content: str
    is_error: bool = False
    data: Any = None
    """Structured payload for the runtime (events, sessions); never shown to the model."""


class Resources:
    """Per-session resources opened on first use and closed when the session ends.

    A tool asks for a resource by key with a factory returning an async context
    manager (for example a sandbox); every later call in the session gets the
    same object, so a sandbox is reused across turns and removed at the end.
    """

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._items: dict[str, Any] = {}
        self._lock = anyio.Lock()

    async def get(self, key: str, factory: Callable[[], Any]) -> Any:
        """The resource for ``key``, entering ``factory()`` on first use."""
        async with self._lock:
            if key not in self._items:
                self._items[key] = await self._stack.enter_async_context(factory())
            return self._items[key]

    def peek(self, key: str) -> Any | None:
        """The resource for ``key`` if it is open, without opening it."""
        return self._items.get(key)

    async def aclose(self) -> None:
        """Close every resource, newest first."""
        self._items.clear()
        await self._stack.aclose()

    async def __aenter__(self) -> Resources:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass
class ToolContext:
    """What a running tool may know about its call."""

    adapter: str
    """The adapter that issued the call (a name the artifact declares)."""
    call_id: str = ""
    """The mol-issued tool call id."""
    session_id: str = ""
    """The session the call belongs to."""
    artifact: Any = None
    """The session's HCP ``Artifact`` (``mol.hcp.loader.Artifact``), when there is one."""
    resources: Resources = field(default_factory=Resources)
    """Per-session resources (e.g. the sandbox), shared by the session's calls."""
    sandbox_pool: Any = None
    """The runtime's warm ``SandboxPool`` (``[sandbox] pool_size`` > 0), else None."""
    emit: Callable[[Any], Awaitable[None]] | None = None
    """Emits events of the call into the turn (progress; model calls made for it, which
    count in the turn's usage and token budget)."""
    elicit: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
    """Asks the person for input (``await elicit(server, request)`` -> an MCP
    ``ElicitResult`` as a dict); None when nobody can answer (requests are declined)."""


ToolFunction = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]


@dataclass(frozen=True)
class Tool:
    """A tool the model can call."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema (an object schema) of the arguments."""
    call: ToolFunction
    """``await call(arguments, context)``; arguments are already validated."""
    source: str = "builtin"
    """Where the tool comes from: ``plugin:NAME``, ``mcp:SERVER`` or ``builtin``."""
    validate: Callable[[dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]] | None = None
    """Validates and normalizes arguments (sync or async), raising ``ValueError`` with a
    readable message. When unset, arguments are checked against ``parameters``
    (``mol.core.schemas``: no remote ``$ref``, patterns under a time budget)."""

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ToolError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")

    def spec(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


def function_tool(func: Callable[..., Any], *, name: str | None = None,
                  source: str = "builtin") -> Tool:
    """Make a ``Tool`` of a typed function (sync or async) with a docstring.

    Parameters become the JSON Schema (pydantic derives it from the type hints
    and defaults); a parameter annotated ``ToolContext`` receives the call's
    context instead. The docstring's first paragraph is the description, and
    ``Args:`` lines (Google style) describe the parameters.
    """
    from pydantic import ConfigDict, Field, ValidationError, create_model

    doc = inspect.getdoc(func) or ""
    description, arg_docs = _parse_docstring(doc)
    if not description:
        raise ToolError(f"tool function {func.__qualname__} needs a docstring (its description)")
    hints = get_type_hints(func)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(func).parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolError(f"tool function {func.__qualname__}: *args/**kwargs are not supported")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=arg_docs.get(param.name)))
    model = create_model(  # type: ignore[call-overload]
        f"{func.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        # Strict, as JSON: the schema the model saw is the contract, so "5" is not a
        # number nor "true" a boolean (lax pydantic would convert both).
        try:
            text = json.dumps(arguments)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid arguments: not JSON ({exc})") from None
        try:
            return dict(model.model_validate_json(text, strict=True))
        except ValidationError as exc:
            raise ValueError(_validation_message(exc)) from None

    async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
        kwargs = dict(arguments)
        if context_param:
            kwargs[context_param] = context
        if inspect.iscoroutinefunction(func):
            return await func(**kwargs)
        return await anyio.to_thread.run_sync(lambda: func(**kwargs))

    return Tool(name=name or func.__name__, description=description, parameters=schema,
                call=call, source=source, validate=validate)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    paragraphs = doc.split("\n\n")
    description = paragraphs[0].strip().replace("\n", " ") if doc else ""
    args: dict[str, str] = {}
    match = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?)+)", doc, re.M)
    if match:
        current = None
        for line in match.group(1).splitlines():
            item = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if item:
                current = item.group(1)
                args[current] = item.group(2).strip()
            elif current and line.strip():
                args[current] += " " + line.strip()
    return description, args


def _validation_message(exc: Any) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        message = "unknown argument" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{where}: {message}")
    return "invalid arguments: " + "; ".join(parts)


def _check_schema(schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Validate arguments against a JSON Schema (hand-written specs; MCP tools compile theirs
    once when listed): null optionals dropped, ``ValueError`` naming what is wrong."""
    from mol.core.schemas import SchemaProblem, compile_schema

    try:
        compiled = compile_schema(schema)
    except SchemaProblem as exc:
        raise ValueError(f"the tool cannot be called: {exc}") from None
    return compiled.check(arguments)


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """Tool-call arguments as the model sent them (JSON text) -> a dict, or ``ValueError``."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def to_result(value: Any) -> ToolResult:
    """Normalize what a tool returned into a ``ToolResult``."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if value is None:
        return ToolResult("")
    try:
        return ToolResult(json.dumps(value, ensure_ascii=False, default=str), data=value)
    except (TypeError, ValueError):
        return ToolResult(str(value), data=value)


async def checked_arguments(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` validated and normalized by ``tool.validate`` (sync or async), or
    against ``tool.parameters``; ``ValueError`` with a readable message otherwise."""
    checked = (tool.validate or (lambda a: _check_schema(tool.parameters, a)))(arguments)
    return await checked if inspect.isawaitable(checked) else checked


async def run_tool(tool: Tool, raw_arguments: str | dict[str, Any] | None,
                   context: ToolContext) -> ToolResult:
    """Parse and validate arguments, then run the tool; failures become error results."""
    try:
        arguments = await checked_arguments(tool, parse_arguments(raw_arguments))
    except ValueError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # a validator must never end the turn
        return ToolResult(f"Error: the arguments of {tool.name} could not be checked: "
                          f"{type(exc).__name__}: {exc}", is_error=True)
    try:
        return to_result(await tool.call(arguments, context))
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        message = str(exc) or type(exc).__name__
        return ToolResult(f"Error: {tool.name} failed: {message}", is_error=True)


class Toolset(Protocol):
    """A source of tools whose list may change or depend on the adapter (e.g. MCP servers)."""

    async def tools(self, adapter: str) -> list[Tool]:
        """The tools this source offers to ``adapter`` (before the adapter's policy)."""
        ...


ToolWrapper = Callable[[str, dict[str, Tool]], dict[str, Tool]]
"""``wrap(adapter, tools) -> tools``: replaces the tools an adapter gets before policy
(recording an episode wraps each tool's ``call``; replaying one serves recorded results)."""


def with_tool(tools: dict[str, Tool], tool: Tool, *, in_place: bool = False
              ) -> dict[str, Tool]:
    """``tools`` with ``tool`` added (a new dict unless ``in_place``); a ``ToolError`` naming
    both sources when another tool has its name."""
    other = tools.get(tool.name)
    if other is not None and other is not tool:
        raise ToolError(f"tool {tool.name!r} is offered by both {other.source} and "
                        f"{tool.source}; rename or disable one of them")
    if in_place:
        tools[tool.name] = tool
        return tools
    return {**tools, tool.name: tool}
