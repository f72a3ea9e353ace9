"""The one mapping of what a turn or a route raised to the client's error
(``mol.server.http.errors.api_error``): the turn room raises ``MolError``s only."""

from __future__ import annotations

import pytest

from mol.core import errors
from mol.server.http.errors import ApiError, api_error


@pytest.mark.parametrize(("raised", "status", "code", "param", "retry"), [
    (errors.ConversationError("no such call", field="input[2].call_id"), 400, None,
     "input[2].call_id", None),
    (errors.ConversationError("no adapter 'L9'"), 400, None, "messages", None),
    (errors.InvalidTranscript("a call without its result"), 400, None, "messages", None),
    (errors.AnswerEnded("that call was answered already", field="input[0].call_id"), 409,
     "elicitation_ended", "input[0].call_id", None),
    (errors.SessionNotFound("no stored response", field="previous_response_id"), 404, None,
     "previous_response_id", None),
    (errors.SessionBusy("another replica", retry_after=29.2), 409, "conversation_busy", None,
     "30"),
    (errors.SessionBusy("almost free", retry_after=0.1), 409, "conversation_busy", None, "1"),
    (errors.SessionConflict("moved on"), 409, "conversation_changed", None, None),
    (errors.Overloaded("full", retry_after=7), 429, "too_many_turns", None, "7"),
    (errors.TurnCancelled("cancelled"), 409, "cancelled", None, None),
    (errors.TurnDeadline("too long"), 504, "deadline", None, None),
    (errors.EngineContextLength("too long", status=400), 400, "context_length_exceeded",
     "messages", None),
    (errors.EngineTimeout("slow"), 504, "engine_timeout", None, None),
    (errors.EngineConnectionError("down"), 502, "engine_error", None, None),
    (errors.HookError("a hook is broken"), 500, None, None, None),
    (KeyError("surprise"), 500, None, None, None),
])
def test_each_error_has_one_status(raised, status, code, param, retry):
    answer = api_error(raised, where="messages")
    assert (answer.status, answer.code, answer.param) == (status, code, param)
    assert answer.headers.get("Retry-After") == retry
    body = answer.body()["error"]
    assert body["type"] == ("server_error" if status >= 500 else body["type"])
    if isinstance(raised, errors.MolError) and not isinstance(raised, errors.EngineError):
        assert str(raised) in answer.message  # mol's own words reach the client
    else:
        assert "surprise" not in answer.message  # an engine's or a bug's do not


def test_an_api_error_passes_through_unchanged():
    error = ApiError(413, "too big")
    assert api_error(error) is error
