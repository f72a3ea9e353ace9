"""The scripted engine's ASGI app: ``GET /v1/models``, ``POST /v1/chat/completions``,
vLLM's ``POST /tokenize`` and, in a LoRA dialect, its load and unload routes and vLLM's
``/metrics`` (``mol.runtime.scripted.loras``).

Every chat request is recorded (parsed body, adapter, matched rule, status)
before the scripted delay, so a test that times out still sees what it sent. The delay
stands for the engine's time to the first token: a streamed answer's headers go out at
once and its first chunk after the delay, as vLLM streams. A client that goes away before
its answer was complete (a cancelled request) is seen: its record gets ``cancelled``. Each
record gets the request's ``duration`` once it is over (how long it held the engine).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mol.runtime.scripted.loras import LoraState
from mol.runtime.scripted.replies import Answer, AnswerFactory, prompt_text, tokenize
from mol.runtime.scripted.requests import (
    ChatRequest,
    HTTPProblem,
    parse_body,
    read_request,
    served_name,
)
from mol.runtime.scripted.script import Rule, Script

_PREVIEW = 200
"""How much of the last message an unmatched-request error quotes."""


class EngineState:
    """What the app shares across requests: the script, the answer factory and the records."""

    def __init__(self, script: Script, latency: float, on_record: Callable[[dict], None],
                 reasoning_parser: str | None = None, context_window: int | None = None,
                 route_latency: float | None = None, loras: LoraState | None = None,
                 served: list[str] | None = None) -> None:
        self.script = script
        self.served = served if served is not None else script.adapters
        """The model names listed in ``/v1/models`` and answered besides the loaded LoRAs
        (``ScriptedEngine``'s ``served``, the same list: a name added is served from then
        on)."""
        self.loras = loras if loras is not None else LoraState(None, False, "", 1, on_record)
        """The LoRAs loaded at runtime (a LoRA dialect's routes; none without one)."""
        self.context_window = context_window
        """Every adapter's context window, in tokens (None: unlimited)."""
        self.latency = latency
        self.route_latency = route_latency
        """Seconds a constrained (routing) request waits instead of ``latency`` (None: the
        same)."""
        self.on_record = on_record
        self.answers = AnswerFactory(reasoning_parser)
        self.records: list[dict[str, Any]] = []
        self.stopping: anyio.Event | None = None
        """Set when the server stops: cuts scripted delays short so shutdown never waits on them."""

    def record(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        self.on_record(record)

    @staticmethod
    def cancelled(record: dict[str, Any]) -> None:
        """The client went away before its answer was complete (its rule stays used)."""
        record["cancelled"] = True

    async def pause(self, seconds: float, receive: Any = None) -> bool:
        """Wait ``seconds`` (cut short when the server stops); True when the client went away
        meanwhile (``receive``: the request's ASGI channel, its body already read)."""
        if seconds <= 0 or self.stopping is None:
            return False
        gone = False
        stopping = self.stopping

        async def watch(scope: anyio.CancelScope) -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            scope.cancel()

        with anyio.move_on_after(seconds):
            async with anyio.create_task_group() as group:
                if receive is not None:
                    group.start_soon(watch, group.cancel_scope)
                await stopping.wait()
                group.cancel_scope.cancel()
        return gone

    def check_window(self, request: ChatRequest) -> None:
        """vLLM's 400 for a request longer than the context window (the prompt and the reply's
        budget), before any rule is consulted, as the engine checks it before generating."""
        if self.context_window is None:
            return
        prompt = len(tokenize(prompt_text(request.body)))
        budget = request.body.get("max_tokens")
        budget = budget if isinstance(budget, int) and not isinstance(budget, bool) else 1
        if prompt + budget > self.context_window:
            raise HTTPProblem(*self.answers.engine_error(request, "context_length",
                                                         self.context_window))

    def answer(self, rule: Rule, request: ChatRequest) -> Answer:
        """The rule's completion, or the HTTPProblem a real engine would give instead."""
        error = rule.error
        if error is not None and error.kind is not None:
            raise HTTPProblem(*self.answers.engine_error(request, error.kind, error.limit))
        if error is not None:
            raise HTTPProblem(error.status, error.message, error.type)
        constraint = request.constraint
        if constraint is not None and rule.tool_calls:
            raise HTTPProblem(400, f"{rule.where} gives tool calls, but the request is constrained "
                              f"({constraint.kind}) to {constraint.describe()}")
        if constraint is not None and not constraint.allows(rule.reply or ""):
            raise HTTPProblem(400, f"{rule.where} replies {rule.reply!r}, which a constrained engine "
                              f"never produces: the request ({constraint.kind}) allows only "
                              f"{constraint.describe()}")
        return self.answers.answer(rule, request)

    def unmatched(self, request: ChatRequest) -> HTTPProblem:
        """The error naming the adapter, the last message and why each rule declined."""
        last = request.body["messages"][-1]
        text = request.text if len(request.text) <= _PREVIEW else request.text[:_PREVIEW] + "..."
        kind = f"constrained ({request.constraint.kind})" if request.constraint else "unconstrained"
        refusals = self.script.refusals(request.adapter, request.text,
                                        request.constraint is not None, request.system,
                                        request.key)
        return HTTPProblem(400, f"no scripted rule of {request.adapter} matches this {kind} request; "
                           f"last message ({last.get('role')}): {text!r}; "
                           f"rules: {'; '.join(refusals) or 'none'}")


def build_app(state: EngineState) -> Starlette:
    """The Starlette app serving ``state``'s script."""

    async def models(request: Request) -> Response:
        root = f"scripted:{state.script.fingerprint()}"
        window = {} if state.context_window is None else {"max_model_len": state.context_window}
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "mol-scripted-engine",
                 "root": root, **window} for name in state.served]
        if state.loras.api is not None:
            data += state.loras.models()
        return JSONResponse({"object": "list", "data": data})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(state.loras.metrics(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def http_error(request: Request, exc: Exception) -> Response:
        # FastAPI's own answer (vLLM's handler is for FastAPI's HTTPException, not the
        # router's): an unknown route is 404 {"detail": "Not Found"}, as vLLM answers its
        # LoRA routes without runtime updating.
        assert isinstance(exc, HTTPException)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", partial(_chat, state), methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/tokenize", partial(_tokenize, state), methods=["POST"]),
        *state.loras.routes(),
    ]
    if state.loras.api == "vllm":
        routes.append(Route("/metrics", metrics, methods=["GET"]))
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


async def _chat(state: EngineState, request: Request) -> Any:
    """``POST /v1/chat/completions``: the request recorded, matched, answered after its
    delay (a streamed one: its first chunk after it)."""
    raw = await request.body()
    received = time.monotonic()
    record: dict[str, Any] = {"seq": len(state.records) + 1, "adapter": None, "rule": None,
                              "status": 200, "body": raw.decode("utf-8", "replace"),
                              "headers": {name: value for name, value in request.headers.items()
                                          if name != "authorization"}}
    delay = state.latency
    running = None  # the model whose request is in flight, once it is answered
    try:
        record["body"] = body = parse_body(raw)
        served = state.loras.served(state.served)
        chat_request = read_request(body, served)
        record["adapter"] = chat_request.adapter
        record["model"] = model = served_name(body["model"], served)
        constraint = chat_request.constraint
        record["constraint"] = constraint.to_json() if constraint else None
        record["thinking"] = chat_request.thinking
        record["prefill"] = chat_request.prefill
        if constraint is not None and state.route_latency is not None:
            delay = state.route_latency
        state.check_window(chat_request)
        rule = state.script.match(chat_request.adapter, chat_request.text,
                                  constraint is not None, chat_request.system,
                                  chat_request.key)
        if rule is None:
            raise state.unmatched(chat_request)
        record["rule"] = rule.index
        delay += rule.delay
        answer = state.answer(rule, chat_request)
        record["usage"] = answer.usage
        state.loras.begin(running := model)
        if chat_request.stream:  # its headers now, its first chunk after the delay
            state.record(record)
            return _Stream(state, record, answer, chat_request, delay, received)
        response: Response = JSONResponse(answer.completion())
    except HTTPProblem as problem:
        record.update(status=problem.status, error=problem.message)
        response = JSONResponse(problem.body(), status_code=problem.status)
    state.record(record)
    try:
        if await state.pause(delay, request.receive):
            state.cancelled(record)
    finally:
        if running is not None:
            state.loras.end(running)
    record["duration"] = time.monotonic() - received
    return response


async def _tokenize(state: EngineState, request: Request) -> Response:
    """vLLM's ``POST /tokenize`` for chat messages: the stand-in tokenizer's count of the
    prompt the messages (and tools) make, as the usage of a completion counts it."""
    try:
        body = parse_body(await request.body())
        if not isinstance(body.get("messages"), list):
            raise HTTPProblem(400, "messages must be an array")
        if body.get("model") not in state.served:
            raise HTTPProblem(404, f"The model `{body.get('model')}` does not exist.",
                              "NotFoundError")
    except HTTPProblem as problem:
        return JSONResponse(problem.body(), status_code=problem.status)
    tokens = tokenize(prompt_text(body))
    return JSONResponse({"count": len(tokens), "max_model_len": 131072, "tokens": []})


class _Stream:
    """A streamed answer: headers at once, then after the delay (the first token's) the
    ``chat.completion.chunk`` events and ``[DONE]``; a client gone meanwhile is recorded."""

    HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache")]

    def __init__(self, state: EngineState, record: dict[str, Any], answer: Answer,
                 request: ChatRequest, delay: float, received: float) -> None:
        self.state, self.record = state, record
        self.answer, self.request, self.delay = answer, request, delay
        self.received = received

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self._send(receive, send)
        finally:
            self.state.loras.end(self.record["model"])
            self.record["duration"] = time.monotonic() - self.received

    async def _send(self, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.HEADERS})
        if await self.state.pause(self.delay, receive):
            self.state.cancelled(self.record)
            return
        events = [f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
                  for chunk in self.answer.chunks(self.request.include_usage)]
        try:
            for event in [*events, "data: [DONE]\n\n"]:
                await send({"type": "http.response.body", "body": event.encode(),
                            "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # gone while its answer went out
            self.state.cancelled(self.record)
