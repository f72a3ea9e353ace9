"""Errors as the server answers them: ``ApiError`` and the one mapping of mol's errors to
HTTP statuses (``api_error``), rendered in the OpenAI error shape or, for a client that
speaks the Anthropic API (``speaks_anthropic``), in Anthropic's.

Turn scheduling (``mol.server.turns``) raises ``MolError``s only; the routes and the
replies pass whatever a turn or a route raised through ``api_error``, so each status is
decided here and nowhere else. The Anthropic rendering keeps that status but for one case:
a server out of turn slots is 529 ``overloaded_error`` there, as Anthropic answers it
(the OpenAI shape says 429).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from starlette.responses import JSONResponse

from mol.core.errors import (
    AnswerEnded,
    ApprovalEnded,
    ContextTooLong,
    ConversationError,
    EngineAdapterUnavailable,
    EngineConnectionError,
    EngineContextLength,
    EngineError,
    EngineRateLimited,
    EngineResponseError,
    EngineTimeout,
    MolError,
    Overloaded,
    SessionBusy,
    SessionConflict,
    SessionNotFound,
    TurnCancelled,
    TurnDeadline,
)

log = logging.getLogger("mol.server")

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 405: "invalid_request_error", 413: "invalid_request_error",
          429: "rate_limit_error"}

_ANTHROPIC_TYPES = {401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 408: "timeout_error", 429: "rate_limit_error",
                    504: "timeout_error", 529: "overloaded_error"}
"""Anthropic's error types by status: other 4xx are ``invalid_request_error``, other 5xx
``api_error`` (the types the Anthropic SDK's ``ErrorObject`` knows)."""

OVERLOADED = "too_many_turns"
"""The code of a refusal for want of a turn slot (429 here, 529 in Anthropic's shape)."""

ANTHROPIC_PATH = "/v1/messages"


def speaks_anthropic(scope: dict[str, Any]) -> bool:
    """Whether a request speaks the Anthropic API: a ``/v1/messages`` route, or any request
    carrying ``anthropic-version`` (the Anthropic SDKs send it on every request)."""
    path = scope.get("path", "")
    if path == ANTHROPIC_PATH or path.startswith(ANTHROPIC_PATH + "/"):
        return True
    return any(key == b"anthropic-version" for key, _ in scope.get("headers", ()))


class ApiError(Exception):
    """An error answered in the OpenAI error shape."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """``{"error": {message, type, param, code}}``."""
        kind = _TYPES.get(self.status, "server_error" if self.status >= 500 else
                          "invalid_request_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param,
                          "code": self.code}}

    def anthropic(self) -> tuple[int, dict[str, Any]]:
        """The status and body in the Anthropic API's shape:
        ``{"type": "error", "error": {"type", "message"}}``."""
        status = 529 if self.code == OVERLOADED else self.status
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else
                                    "invalid_request_error")
        return status, {"type": "error", "error": {"type": kind, "message": self.message}}

    def response(self, scope: dict[str, Any] | None = None) -> JSONResponse:
        """The HTTP response for this error, in the shape the request at ``scope`` speaks
        (the OpenAI one without a scope)."""
        if scope is not None and speaks_anthropic(scope):
            status, body = self.anthropic()
            return JSONResponse(body, status_code=status, headers=self.headers)
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def api_error(exc: BaseException, where: str | None = None) -> ApiError:
    """What the client is answered for ``exc``, raised by a route or by a turn; ``where``
    names the request field a ``ConversationError`` without a field of its own is about."""
    if isinstance(exc, ApiError):
        return exc
    message = str(exc)
    if isinstance(exc, AnswerEnded):
        code = "approval_ended" if isinstance(exc, ApprovalEnded) else "elicitation_ended"
        return ApiError(409, message, param=exc.field, code=code)
    if isinstance(exc, ContextTooLong):
        return ApiError(400, message, param=exc.field or where, code="context_length_exceeded")
    if isinstance(exc, ConversationError):
        return ApiError(400, message, param=exc.field or where)
    if isinstance(exc, SessionNotFound):
        return ApiError(404, message, param=exc.field)
    if isinstance(exc, SessionBusy | Overloaded):
        retry = {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
        if isinstance(exc, Overloaded):
            return ApiError(429, message, code=OVERLOADED, headers=retry)
        return ApiError(409, message, code="conversation_busy", headers=retry)
    if isinstance(exc, SessionConflict):
        return ApiError(409, f"{message}; continue from the conversation's latest point",
                        code="conversation_changed")
    if isinstance(exc, TurnCancelled):
        return ApiError(409, message, code="cancelled")
    if isinstance(exc, TurnDeadline):
        return ApiError(504, message, code="deadline")
    if isinstance(exc, EngineError):
        return engine_error(exc)
    if isinstance(exc, MolError):
        return ApiError(500, message)
    return ApiError(500, f"internal error: {type(exc).__name__}")


def engine_error(exc: EngineError) -> ApiError:
    """An engine failure as the client sees it: 400 ``context_length_exceeded`` when the
    conversation no longer fits the model, 504 for a timeout, 502 otherwise. The message
    says what happened in mol's words; the engine's own text (litellm's wording, the
    engine's internals) goes to the log only."""
    log.warning("engine failure (%s): %s", type(exc).__name__, exc)
    if isinstance(exc, EngineContextLength):
        return ApiError(400, "the conversation is longer than the model's context window; "
                        "start a new conversation or send less", param="messages",
                        code="context_length_exceeded")
    if isinstance(exc, EngineTimeout):
        return ApiError(504, "the model engine did not answer in time", code="engine_timeout")
    return ApiError(502, f"the model engine failed: {_failure(exc)}", code="engine_error")


def _failure(exc: EngineError) -> str:
    """What kind of engine failure ``exc`` is, without the engine's own words."""
    if isinstance(exc, EngineAdapterUnavailable):
        return "the adapter is not available on the engine"
    if isinstance(exc, EngineConnectionError):
        return "it cannot be reached"
    if isinstance(exc, EngineRateLimited):
        return "it is overloaded (429)"
    if isinstance(exc, EngineResponseError) and exc.status:
        return f"it answered HTTP {exc.status}"
    return "its reply could not be read"
