"""The Agent Client Protocol SDK boundary: the only module of mol that imports ``acp`` (PyPI
``agent-client-protocol``, the extra ``acp``).

What mol takes from the SDK: the protocol version and method names (``acp.meta``), the
JSON-RPC connection (``acp.connection.Connection``: requests dispatched concurrently,
responses matched to mol's own requests), and the pydantic models of every message mol
reads (``acp.schema``). Messages mol sends are plain dicts in the wire's camelCase
shapes; the tests check each one against the same models.

Errors both ways are translated here:

- a ``MolError`` raised by a handler becomes a JSON-RPC error (``rpc_error``): a
  ``ConversationError`` is ``-32602`` (invalid params), ``SessionNotFound`` ``-32002``
  (resource not found), any other ``-32603``; the message names the field at fault;
- the client's answer to one of mol's requests (an error, a closed connection, a reply the
  models refuse) becomes a ``ClientError`` (``Peer.request``).
"""

from __future__ import annotations

import json
from typing import Any

from acp import schema
from acp.connection import Connection
from acp.exceptions import RequestError
from acp.meta import AGENT_METHODS, CLIENT_METHODS, PROTOCOL_VERSION
from pydantic import BaseModel, ValidationError

from mol.core.errors import ClientError, ConversationError, MolError, SessionNotFound

__all__ = ["AGENT_METHODS", "CLIENT_METHODS", "PROTOCOL_VERSION", "Peer", "connect",
           "mcp_server", "parsed", "rpc_error"]

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601
INVALID_PARAMS, INTERNAL_ERROR, RESOURCE_NOT_FOUND = -32602, -32603, -32002
"""The JSON-RPC error codes mol answers with (``-32002``: ACP's resource not found)."""

REQUESTS: dict[str, type[BaseModel]] = {
    AGENT_METHODS["initialize"]: schema.InitializeRequest,
    AGENT_METHODS["session_new"]: schema.NewSessionRequest,
    AGENT_METHODS["session_load"]: schema.LoadSessionRequest,
    AGENT_METHODS["session_prompt"]: schema.PromptRequest,
    AGENT_METHODS["session_cancel"]: schema.CancelNotification,
}
"""The params model of each method mol answers."""

RESPONSES: dict[str, type[BaseModel]] = {
    CLIENT_METHODS["session_request_permission"]: schema.RequestPermissionResponse,
    CLIENT_METHODS["fs_read_text_file"]: schema.ReadTextFileResponse,
    CLIENT_METHODS["fs_write_text_file"]: schema.WriteTextFileResponse,
    CLIENT_METHODS["terminal_create"]: schema.CreateTerminalResponse,
    CLIENT_METHODS["terminal_output"]: schema.TerminalOutputResponse,
    CLIENT_METHODS["terminal_wait_for_exit"]: schema.WaitForTerminalExitResponse,
    CLIENT_METHODS["terminal_kill"]: schema.KillTerminalResponse,
    CLIENT_METHODS["terminal_release"]: schema.ReleaseTerminalResponse,
}
"""The result model of each client method mol calls."""

MCP_SERVERS: dict[str | None, type[BaseModel]] = {
    None: schema.McpServerStdio, "stdio": schema.McpServerStdio, "http": schema.HttpMcpServer}
"""An entry of ``mcpServers`` by its ``type`` (stdio servers have none)."""


def where(loc: tuple[Any, ...], data: Any) -> str:
    """A pydantic error location as the field's path in the message (``prompt[0].text``):
    list indices in brackets, and the tags pydantic adds for a discriminated union (the
    block's ``type``) left out."""
    parts: list[str] = []
    for at, key in enumerate(loc):
        if isinstance(key, int):
            parts.append(f"[{key}]")
            data = data[key] if isinstance(data, list) and key < len(data) else None
            continue
        if (isinstance(data, dict) and key not in data and data.get("type") == key
                and at < len(loc) - 1):
            continue  # the union's tag, not a field of the message
        parts.append(f".{key}" if parts else str(key))
        data = data.get(key) if isinstance(data, dict) else None
    return "".join(parts)


def problems(exc: ValidationError, data: Any, prefix: str = "") -> str:
    """Every problem of ``exc``, each after the path of its field."""
    lines = []
    for error in exc.errors():
        path = where(error["loc"], data)
        path = f"{prefix}{'.' if prefix and path and not path.startswith('[') else ''}{path}"
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"{path or 'params'}: {message}")
    return "; ".join(lines)


def parsed(method: str, params: Any) -> Any:
    """``params`` of ``method`` as the SDK's model; a ``ConversationError`` naming each field
    at fault otherwise."""
    model = REQUESTS[method]
    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]["loc"]
        raise ConversationError(problems(exc, params), field=where(first, params)) from None


def mcp_server(entry: Any, index: int) -> Any:
    """Entry ``index`` of a session's ``mcpServers`` as the SDK's model. The SDK drops an
    entry it cannot read without a word; mol names what is wrong with it instead."""
    prefix = f"mcpServers[{index}]"
    kind = entry.get("type") if isinstance(entry, dict) else None
    model = MCP_SERVERS.get(kind)
    if model is None:
        known = "stdio (no type) and http"
        what = ("an SSE server: mol speaks streamable HTTP to MCP servers, so give the "
                "server's HTTP endpoint" if kind == "sse" else f"type {kind!r}")
        raise ConversationError(f"{prefix}.type: {what} is not supported ({known} are)",
                                field=f"{prefix}.type")
    try:
        return model.model_validate(entry)
    except ValidationError as exc:
        first = exc.errors()[0]["loc"]
        raise ConversationError(problems(exc, entry, prefix),
                                field=f"{prefix}.{where(first, entry)}") from None


def rpc_error(exc: MolError) -> RequestError:
    """The JSON-RPC error a handler's ``MolError`` is answered with."""
    if isinstance(exc, ConversationError):
        return RequestError(INVALID_PARAMS, f"Invalid params: {exc}",
                            {"field": exc.field} if exc.field else None)
    if isinstance(exc, SessionNotFound):
        return RequestError(RESOURCE_NOT_FOUND, f"Resource not found: {exc}",
                            {"field": exc.field} if exc.field else None)
    return RequestError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")


def method_not_found(method: str) -> RequestError:
    """The error for a method mol does not answer."""
    return RequestError(METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})


def error_message(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response (``id`` null: the request could not be read)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class Peer:
    """The client's side of the connection, as mol calls it: notifications and requests,
    their failures as ``ClientError``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification (``session/update``)."""
        try:
            await self.connection.send_notification(method, params)
        except (ConnectionError, OSError) as exc:
            raise ClientError(f"the client is gone: {exc}") from exc

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and wait for its result, read with the SDK's model of it."""
        try:
            result = await self.connection.send_request(method, params)
        except RequestError as exc:
            detail = f" ({json.dumps(exc.data)})" if exc.data is not None else ""
            raise ClientError(f"the client answered {method} with error {exc.code}: "
                              f"{exc}{detail}") from exc
        except (ConnectionError, OSError) as exc:
            raise ClientError(f"the client is gone: {exc}") from exc
        try:
            return RESPONSES[method].model_validate(result if result is not None else {})
        except ValidationError as exc:
            raise ClientError(f"the client's answer to {method} is invalid: "
                              f"{problems(exc, result)}") from exc


def connect(handler: Any, transport: Any) -> Connection:
    """The JSON-RPC connection over ``transport`` (a ``mol.acpagent.wire.Wire``), each
    request and notification passed to ``await handler(method, params, is_notification)``
    in a task of its own; ``main_loop()`` reads until the client closes its end."""
    return Connection(handler, transport, listening=False)
