"""``POST /v1/responses/compact``: compact every adapter's view of the conversation a
Responses request continues, and answer OpenAI's ``response.compaction`` object: the
conversation's user messages, then one ``compaction`` item whose token continues it
(``mol.server.api.compaction``)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mol.core import events as ev
from mol.runtime import TurnResult
from mol.server.api.compaction import seal
from mol.server.api.responses import turn_request, usage_object
from mol.server.http.bodies import read_json
from mol.server.http.errors import api_error
from mol.server.turns.jobs import Job


async def compact_response(request: Request) -> Response:
    """``POST /v1/responses/compact``: compact the conversation the request continues."""
    state = request.app.state
    body = await read_json(request, state.max_body)
    turn, _ = turn_request(body, state, compact=True)
    job = await state.runner.start(turn)
    try:
        return JSONResponse(await _compacted(job, state.compaction_secret))
    finally:
        job.delivered.set()


async def _compacted(job: Job, secret: bytes) -> dict[str, Any]:
    """The ``response.compaction`` object, once the job's compaction is done and named."""
    used = ev.TurnUsage()
    async for item in job.outcomes():
        if isinstance(item, Exception):
            raise api_error(item, "input")
        if isinstance(item, ev.ModelCalled):
            used.add(item)
        elif isinstance(item, TurnResult):
            break
    item_id = "cmp_" + secrets.token_hex(12)
    await job.ends_at(item_id)
    conversation = job.flight.conversation
    users = [{"type": "message", "role": "user", "id": f"msg_{turn.index}_{item_id[4:12]}",
              "status": "completed", "content": [{"type": "input_text", "text": turn.user}]}
             for turn in (conversation.turns if conversation else []) if turn.user]
    return {"id": "resp_" + secrets.token_hex(16), "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*users, {"type": "compaction", "id": item_id,
                                "encrypted_content": seal(secret, item_id)}],
            "usage": usage_object(used)}
