"""The local engine's server process: llama-cpp-python's OpenAI server, adjusted for MoL.

``mol.runtime.llamacpp.supervisor`` runs ``python -m mol.runtime.llamacpp.server --config_file CFG``
with a config in llama-cpp-python's own format (one model entry per adapter). Two
adjustments to the stock ``python -m llama_cpp.server``:

1. Every model entry stays loaded. The stock server holds one model and reloads it from disk
   whenever a request names another alias, which throws the KV cache away: in a MoL turn
   (route on L0, answer on L2, summary on L0) no adapter would ever hit its prefix cache. Here
   each adapter keeps its own llama.cpp context over the same memory-mapped weights, so every
   request that extends the adapter's previous one only evaluates the new tokens.
2. Chat format ``mol-chatml-tools``: ``chatml-function-calling`` with OpenAI semantics. Tools
   without ``tool_choice`` mean ``auto`` (the stock handler ignores the tools then); ``tool``
   messages are shown to the model (the stock template drops them); a message chosen over
   the tools is not left empty (the stock handler constrains it with its tool-name grammar);
   and a streamed request with tools gets its answer as chunks (the stock handler refuses to
   stream an automatic tool choice).

Run by mol only; it imports llama_cpp, so nothing else in mol imports this module.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from typing import Any

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


def register_tools_format() -> None:
    """Register the ``mol-chatml-tools`` chat format (idempotent)."""
    from llama_cpp import llama_chat_format as formats

    base = formats.get_chat_completion_handler("chatml-function-calling")

    def handler(*, messages: list, tools: list | None = None, tool_choice: Any = None,
                stream: bool = False, **kwargs: Any) -> Any:
        messages = _show_tool_results(messages)
        if tools and tool_choice is None:
            tool_choice = "auto"
        if not tools or tool_choice == "none":
            return base(messages=messages, tools=tools, tool_choice=tool_choice, stream=stream,
                        **kwargs)
        response = base(messages=messages, tools=tools, tool_choice=tool_choice, stream=False,
                        **kwargs)
        if tool_choice == "auto" and not response["choices"][0]["message"].get("tool_calls"):
            # When the model chooses "message:", chatml-function-calling constrains the message
            # with its tool-name grammar, which leaves it empty: answer again without tools.
            return base(messages=messages, tools=None, tool_choice=None, stream=stream, **kwargs)
        return _as_chunks(response) if stream else response

    formats.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        TOOLS_FORMAT, handler, overwrite=True
    )


def keep_models_loaded() -> None:
    """Make the server keep every model entry loaded instead of swapping on each alias."""
    import llama_cpp.server.app as app
    from llama_cpp.server.model import LlamaProxy

    class KeepLoadedProxy(LlamaProxy):
        def __init__(self, models: list) -> None:
            super().__init__(models)  # loads the first entry
            self._loaded = {self._current_model_alias: self._current_model}
            for alias in self._model_settings_dict:  # load the rest now: ready means ready
                self(alias)

        def __call__(self, model: str | None = None) -> Any:
            alias = model if model in self._model_settings_dict else self._default_model_alias
            if alias not in self._loaded:
                settings = self._model_settings_dict[alias]
                self._loaded[alias] = self.load_llama_from_model_settings(settings)
            self._current_model, self._current_model_alias = self._loaded[alias], alias
            return self._current_model

        def free(self) -> None:
            for llama in self._loaded.values():
                llama.close()
            self._loaded.clear()
            self._current_model = None

    app.LlamaProxy = KeepLoadedProxy  # create_app() builds its proxy from this name


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
    keep_models_loaded()
    os.environ.pop("CONFIG_FILE", None)  # create_app() would re-read it over ours
    app = create_app(server_settings=ServerSettings.model_validate(config),
                     model_settings=config.models)
    from mol.runtime import serving

    serving.run(app, host=config.host, port=config.port, log_level="warning")


if __name__ == "__main__":
    main()
