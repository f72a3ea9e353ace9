"""The local engine's server process: llama-cpp-python's OpenAI server, adjusted for MoL.

``mol.runtime.llamacpp.supervisor`` runs ``python -m mol.runtime.llamacpp.server --config_file CFG``
with a config in llama-cpp-python's own format (one model entry per adapter). Four
adjustments to the stock ``python -m llama_cpp.server``:

1. Every model entry stays loaded. The stock server holds one model and reloads it from disk
   whenever a request names another alias, which throws the KV cache away: in a MoL turn
   (route on L0, answer on L2, summary on L0) no adapter would ever hit its prefix cache. Here
   each adapter keeps its own llama.cpp context over the same memory-mapped weights (its LoRA
   applied to the context: ``mol.runtime.llamacpp.contexts``), so every request that
   extends the adapter's previous one only evaluates the new tokens.
2. Chat format ``mol-chatml-tools``: ``chatml-function-calling`` with OpenAI semantics. Tools
   without ``tool_choice`` mean ``auto`` (the stock handler ignores the tools then); ``tool``
   messages are shown to the model (the stock template drops them); a message chosen over
   the tools is not left empty (the stock handler constrains it with its tool-name grammar);
   an automatic tool call keeps to the request's ``max_tokens`` (the stock handler writes
   its arguments, and more calls, with no limit); and a streamed request with tools gets its answer as chunks (the stock
   handler refuses to stream an automatic tool choice).
3. Its own ``/v1/models`` and ``/v1/chat/completions``. The model list reports each
   adapter's window (``max_model_len``, as vLLM's does), so mol sizes compaction without an
   artifact saying it. A chat completion reports what llama.cpp evaluated for it
   (``timings`` as llama.cpp's own server, ``usage.prompt_tokens_details.cached_tokens`` as
   OpenAI's API; ``mol.runtime.llamacpp.timings``). A stream starts only once the prompt is
   evaluated, so a prompt longer than the window is the same 400 ``context_length_exceeded``
   streamed or not (the stock server starts the stream, then ends it empty), and it ends with
   a usage chunk when ``stream_options.include_usage`` asks (the stock one has none). A
   request naming a model not served is vLLM's 404 (the stock server answers it with its
   first model: another adapter's answer).
4. vLLM's ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``: a GGUF LoRA becomes a
   new adapter while the server runs (``mol.runtime.llamacpp.models``).

Run by mol only; it imports llama_cpp, so nothing else in mol imports this module.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from typing import Any

from mol.runtime.llamacpp.contexts import load_entry
from mol.runtime.llamacpp.models import Served, routes, unknown_model
from mol.runtime.llamacpp.timings import Meter

TOOLS_FORMAT = "mol-chatml-tools"
"""Name of the chat format registered here for the tool-using adapters."""


def _show_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages the chatml template renders: tool results become user messages."""
    shown = []
    for message in messages:
        if message.get("role") == "tool":
            content = message.get("content") or ""
            if not isinstance(content, str):
                content = json.dumps(content)
            shown.append({"role": "user", "content": f"Function result:\n{content}"})
        else:  # the template reads .content of every message and loops over any tool_calls
            shown.append({**{k: v for k, v in message.items() if k != "tool_calls"},
                          "content": message.get("content"),
                          **({"tool_calls": message["tool_calls"]}
                             if message.get("tool_calls") else {})})
    return shown


def _as_chunks(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A finished chat completion as the stream of chunks that would have carried it."""
    choice = response["choices"][0]
    message = choice["message"]
    head = {key: response[key] for key in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [
            {"index": i, **call} for i, call in enumerate(message["tool_calls"])
        ]
    yield {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None,
                                "logprobs": None}]}
    yield {**head, "choices": [{"index": 0, "delta": {},
                                "finish_reason": choice["finish_reason"], "logprobs": None}]}


class _Bounded:
    """The model as the stock tool handler sees it: every completion it asks for keeps to what
    is left of the request's ``max_tokens``. The handler asks for an automatic call's
    arguments with no limit, and asks again for calls while the model picks one, so a small
    model could write until the window was full (measured: SmolLM2-135M's ``to_upper`` calls
    took all 4,096 tokens, and a 1,300-token request was answered "context length
    exceeded"). Once nothing is left each completion gets one token, which ends the loop."""

    def __init__(self, llama: Any, max_tokens: int) -> None:
        self._llama, self._left = llama, max_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, *args: Any, max_tokens: int | None = None, **kwargs: Any) -> Any:
        """``Llama.create_completion``, no longer than the request has left."""
        allowed = max(1, self._left)
        if max_tokens is None or max_tokens <= 0 or max_tokens > allowed:
            max_tokens = allowed
        completion = self._llama.create_completion(*args, max_tokens=max_tokens, **kwargs)
        if isinstance(completion, dict):  # the tool paths ask without streaming
            self._left -= completion["usage"]["completion_tokens"]
        return completion


def register_tools_format() -> None:
    """Register the ``mol-chatml-tools`` chat format (idempotent)."""
    from llama_cpp import llama_chat_format as formats

    base = formats.get_chat_completion_handler("chatml-function-calling")

    def handler(*, llama: Any, messages: list, tools: list | None = None,
                tool_choice: Any = None, stream: bool = False, **kwargs: Any) -> Any:
        messages = _show_tool_results(messages)
        if tools and tool_choice is None:
            tool_choice = "auto"
        if not tools or tool_choice == "none":
            return base(llama=llama, messages=messages, tools=tools, tool_choice=tool_choice,
                        stream=stream, **kwargs)
        bounded = _Bounded(llama, kwargs["max_tokens"]) if kwargs.get("max_tokens") else llama
        response = base(llama=bounded, messages=messages, tools=tools, tool_choice=tool_choice,
                        stream=False, **kwargs)
        if tool_choice == "auto" and not response["choices"][0]["message"].get("tool_calls"):
            # When the model chooses "message:", chatml-function-calling constrains the message
            # with its tool-name grammar, which leaves it empty: answer again without tools.
            return base(llama=llama, messages=messages, tools=None, tool_choice=None,
                        stream=stream, **kwargs)
        return _as_chunks(response) if stream else response

    formats.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        TOOLS_FORMAT, handler, overwrite=True
    )


def _meter(llama: Any) -> Meter:
    """A ``Meter`` over llama.cpp's performance counters of ``llama``'s context."""
    import llama_cpp

    return Meter(llama, lambda: llama_cpp.llama_perf_context(llama.ctx),
                 lambda: llama_cpp.llama_perf_context_reset(llama.ctx))


def keep_models_loaded(served: Served) -> None:
    """Make the server keep every model entry loaded instead of swapping on each alias, tell
    ``served`` of each, and let ``mol.runtime.llamacpp.models`` add and drop entries."""
    import llama_cpp.server.app as app
    from llama_cpp.server.model import LlamaProxy

    class KeepLoadedProxy(LlamaProxy):
        load_llama_from_model_settings = staticmethod(load_entry)

        def __init__(self, models: list) -> None:
            super().__init__(models)  # loads the first entry
            self._loaded: dict[str, Any] = {}
            for alias, settings in self._model_settings_dict.items():  # all now: ready is ready
                self._loaded[alias] = (self._current_model if alias == self._current_model_alias
                                       else load_entry(settings))
                served.add(alias, self._loaded[alias], lora=bool(settings.lora_path),
                           root=settings.lora_path or settings.model)

        def __call__(self, model: str | None = None) -> Any:
            alias = model if model in self._loaded else self._default_model_alias
            self._current_model, self._current_model_alias = self._loaded[alias], alias
            return self._current_model

        def load_lora(self, name: str, path: str) -> Any:
            settings = self._default_model_settings.model_copy(update={
                "model_alias": name, "lora_path": path, "chat_format": TOOLS_FORMAT})
            return load_entry(settings)

        def serve(self, name: str, llama: Any) -> None:
            self._loaded[name] = llama

        def drop(self, name: str) -> Any:
            if self._current_model_alias == name:
                self._current_model, self._current_model_alias = None, None
            return self._loaded.pop(name)

        def exclusive(self) -> Any:
            from contextlib import asynccontextmanager

            return asynccontextmanager(app.get_llama_proxy)()

        def free(self) -> None:
            for llama in self._loaded.values():
                llama.close()
            self._loaded.clear()
            self._current_model = None

    app.LlamaProxy = KeepLoadedProxy  # create_app() builds its proxy from this name


def replace_routes(app: Any, served: Served, host: Any) -> None:
    """Answer ``GET /v1/models`` and ``POST /v1/chat/completions`` with mol's endpoints, and
    serve vLLM's ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``
    (``mol.runtime.llamacpp.models``): the model list reports each adapter's window as vLLM's
    does (``max_model_len``), and a chat completion its ``usage`` and ``timings``
    (``mol.runtime.llamacpp.timings``)."""
    from llama_cpp.server.app import router
    from starlette.routing import Route

    # The stock route's error formatting (its RouteErrorHandler): OpenAI's error bodies.
    (stock_chat,) = [route for route in router.routes
                     if getattr(route, "path", "") == "/v1/chat/completions"]

    async def chat(request: Any) -> Any:
        return await _chat_answer(request, served, stock_chat)

    # First, so they answer before the stock routes of the same paths.
    app.router.routes[:0] = [*routes(served, host),
                             Route("/v1/chat/completions", chat, methods=["POST"])]


async def _chat_answer(request: Any, served: Served, stock_route: Any) -> Any:
    """The ASGI answer to one chat completion request (``_Answer``), or a 422 naming what of
    the body is wrong, as the stock server's."""
    import pydantic
    from llama_cpp.server.types import CreateChatCompletionRequest
    from starlette.responses import JSONResponse

    try:
        payload = await request.json()
        body = CreateChatCompletionRequest.model_validate(payload)
    except pydantic.ValidationError as exc:
        return JSONResponse({"detail": json.loads(exc.json())}, status_code=422)
    except ValueError as exc:  # not JSON
        return JSONResponse({"detail": f"the body is not JSON: {exc}"}, status_code=400)
    include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
    return _Answer(body, served, stock_route.error_message_wrapper, include_usage)


class _Answer:
    """One chat completion, run when the response is sent. A stream starts only once its first
    chunk exists, so a request that fails before it (a prompt longer than the adapter's
    window) gets an ordinary error answer, as a non-streamed one does (the stock server
    answers 200, then ends the stream empty); its last chunk carries the ``timings``, and a
    chunk with the ``usage`` follows when ``stream_options.include_usage`` asks for one."""

    def __init__(self, body: Any, served: Served, error: Any, include_usage: bool) -> None:
        self.body, self.served, self.error, self.include_usage = (body, served, error,
                                                                  include_usage)
        self.kwargs = body.model_dump(exclude={"n", "logit_bias_type", "user", "min_tokens"})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from contextlib import asynccontextmanager

        from llama_cpp.server import app
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        async with asynccontextmanager(app.get_llama_proxy)() as proxy:  # one request at a time
            model = self.body.model
            if model is not None and model not in self.served.entries:  # never another's
                await unknown_model(model)(scope, receive, send)
                return
            try:
                llama = app.prepare_request_resources(self.body, proxy, self.body.model,
                                                      self.kwargs)
                meter = self.served.meter(llama)
                meter.start()
                answer = await run_in_threadpool(llama.create_chat_completion, **self.kwargs)
                if self.body.stream:
                    answer = iter(answer)
                    head = await run_in_threadpool(next, answer, None)  # evaluates the prompt
            except Exception as exc:
                status, error = self.error(error=exc, body=self.body)
                await JSONResponse({"error": error}, status_code=status)(scope, receive, send)
                return
            if not self.body.stream:
                answer["usage"] = meter.usage(answer.get("usage"))
                answer["timings"] = meter.timings()
                await JSONResponse(answer)(scope, receive, send)
                return
            await self._stream(head, answer, meter, scope, receive, send)

    async def _stream(self, head: Any, chunks: Iterator[dict[str, Any]], meter: Meter,
                      scope: Any, receive: Any, send: Any) -> None:
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request

        async def event(data: Any) -> None:
            text = data if isinstance(data, str) else json.dumps(data)
            await send({"type": "http.response.body", "body": f"data: {text}\n\n".encode(),
                        "more_body": True})

        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache")]})
        request, first = Request(scope, receive), head
        try:
            while head is not None and not await request.is_disconnected():
                following = await run_in_threadpool(next, chunks, None)
                if following is None:  # the last chunk, as llama.cpp's server's
                    head["timings"] = meter.timings()
                await event(head)
                head = following
            if head is None:  # not cut short by the client
                if self.include_usage:
                    await event({**{key: first[key] for key in ("id", "created", "model",
                                                                "object")},
                                 "choices": [], "usage": meter.usage()})
                await event("[DONE]")
        except Exception as exc:  # mid-stream: the stream ends with an error event
            await event({"error": self.error(error=exc, body=self.body)[1]})
        finally:
            getattr(chunks, "close", lambda: None)()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _exit_with_parent(parent_pid: int) -> None:
    """End this process group when mol dies without stopping us (SIGKILL, a crash): the
    server runs in its own session, so nothing else would."""
    import signal
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """Serve the models of ``--config_file`` until terminated."""
    parser = argparse.ArgumentParser(prog="python -m mol.runtime.llamacpp.server")
    parser.add_argument("--config_file", required=True, help="llama_cpp.server JSON config")
    parser.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    args = parser.parse_args(argv)
    if args.parent_pid:
        _exit_with_parent(args.parent_pid)

    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ConfigFileSettings, ServerSettings

    with open(args.config_file, "rb") as f:
        config = ConfigFileSettings.model_validate_json(f.read())
    register_tools_format()
    served = Served(_meter)
    keep_models_loaded(served)
    os.environ.pop("CONFIG_FILE", None)  # create_app() would re-read it over ours
    app = create_app(server_settings=ServerSettings.model_validate(config),
                     model_settings=config.models)
    import llama_cpp.server.app as stock

    replace_routes(app, served, stock._llama_proxy)  # the KeepLoadedProxy create_app() built
    from mol.runtime import serving

    serving.run(app, host=config.host, port=config.port, log_level="warning")


if __name__ == "__main__":
    main()
