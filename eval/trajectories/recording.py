"""Recording an episode: wrappers around the engine, the tools and the sandbox.

``Recorder`` collects the records of ``mol.eval.trajectories.format`` through four seams, none of
which the harness knows about: ``RecordingEngine`` (the ``Engine`` protocol), the
harness's ``tool_wrapper`` (``Recorder.wrap_tools``), ``RecordingSandbox`` (what the
sandbox tools get from ``ToolContext.resources``) and the turn's events (``on_event``).

Records between two engine requests form a *step*. Tool calls of one reply run
concurrently, so their records arrive in any order; when a step ends its call records are
put in the order the reply asked for the calls. Serializing happens once per record, at
the end of its step; nothing is written to disk during the episode.
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mol.core import events as ev
from mol.core.tools import Tool, ToolContext, to_result
from mol.eval.trajectories.format import FORMAT, dumps
from mol.runtime import Completion, Engine, OnDelta

_OPS: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "mol_eval_tool_ops", default=None)
"""The sandbox operations of the tool call running in this task, if any."""

_SKIPPED = (ev.ModelCalled, ev.TextDelta, ev.ToolCallDelta)


def numbered_ids() -> Callable[[str], str]:
    """Tool call ids ``call_<adapter>_<n in hex>``, numbered in the order they are issued:
    an episode run twice (or replayed) issues the same ones."""
    count = itertools.count(1)
    return lambda adapter: f"call_{adapter}_{next(count):024x}"


def reply_record(completion: Completion) -> dict[str, Any]:
    """A completion as recorded (no duration: it differs between runs)."""
    return {"content": completion.content, "finish_reason": completion.finish_reason,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in completion.tool_calls],
            "usage": completion.usage.to_dict(), "reasoning": completion.reasoning}


class Recorder:
    """The records of one episode, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._step: list[dict[str, Any]] = []
        self._exchange: dict[str, Any] | None = None
        self._catalogued: set[str] = set()

    def add(self, record: dict[str, Any]) -> None:
        """Append a record to the current step."""
        self._step.append(record)

    def header(self, **fields: Any) -> None:
        """The ``episode`` record (first in the trajectory)."""
        self.add({"kind": "episode", "format": FORMAT, **fields})

    # -- engine ---------------------------------------------------------------------------

    def exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        """A new engine request: ends the step, starts the next one with this record."""
        self.flush()
        self._exchange = {"kind": "engine", "purpose": "", "request": request}
        self.add(self._exchange)
        return self._exchange

    # -- events ---------------------------------------------------------------------------

    def on_event(self, event: ev.Event) -> None:
        """Record a turn's event (the harness's ``on_event``)."""
        exchange = self._exchange
        if isinstance(event, ev.ModelCalled | ev.Failed) and exchange and not exchange["purpose"]:
            exchange["purpose"] = event.purpose if isinstance(event, ev.ModelCalled) else (
                event.where if "error" in exchange else "")
        if not isinstance(event, _SKIPPED):
            self.add({"kind": "event", "event": event.to_dict()})

    # -- tools ----------------------------------------------------------------------------

    def wrap_tools(self, adapter: str, tools: dict[str, Tool]) -> dict[str, Tool]:
        """The harness's ``tool_wrapper``: every call of ``tools`` is recorded; the tools
        toolsets offer ``adapter`` are recorded once (replay offers the same)."""
        if adapter not in self._catalogued:
            self._catalogued.add(adapter)
            offered = [{"name": t.name, "description": t.description,
                        "parameters": t.parameters, "source": t.source}
                       for t in sorted(tools.values(), key=lambda t: t.name)
                       if not t.source.startswith("plugin:")]
            if offered:
                self.add({"kind": "catalog", "adapter": adapter, "tools": offered})
        return {name: replace(tool, call=self._recorded(tool)) for name, tool in tools.items()}

    def _recorded(self, tool: Tool) -> Any:
        async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
            ops: list[dict[str, Any]] = []
            record: dict[str, Any] = {"kind": "tool", "call_id": context.call_id,
                                      "adapter": context.adapter, "name": tool.name,
                                      "source": tool.source, "arguments": arguments}
            token = _OPS.set(ops)
            try:
                result = to_result(await tool.call(arguments, context))
                record["result"] = {"content": result.content, "is_error": result.is_error}
                return result
            except Exception as exc:
                record["raised"] = str(exc) or type(exc).__name__
                raise
            except BaseException:
                record["cancelled"] = True
                raise
            finally:
                _OPS.reset(token)
                record["sandbox"] = ops
                self.add(record)

        return call

    # -- sandbox --------------------------------------------------------------------------

    def sandbox_op(self, op: dict[str, Any]) -> None:
        """One sandbox operation: part of the running tool call's record, else its own."""
        ops = _OPS.get()
        if ops is not None:
            ops.append(op)
        else:
            self.add({"kind": "sandbox", **op})

    # -- output ---------------------------------------------------------------------------

    def flush(self) -> None:
        """End the step: order its call records by the reply, serialize it."""
        step, self._step = self._step, []
        order = _call_order(step)
        positions = [i for i, record in enumerate(step) if _call_of(record) in order]
        ordered = sorted((step[i] for i in positions), key=lambda r: order[_call_of(r)])
        for position, record in zip(positions, ordered, strict=True):
            step[position] = record
        self.lines += [dumps(record) for record in step]

    def finish(self) -> list[str]:
        """Every line of the trajectory (ends the last step)."""
        self.flush()
        return self.lines


def _call_of(record: dict[str, Any]) -> str | None:
    if record.get("kind") == "tool":
        return record.get("call_id") or None
    if record.get("kind") == "event":
        return record["event"].get("call_id") or None
    return None


def _call_order(step: list[dict[str, Any]]) -> dict[str, int]:
    """Call id -> its index in the reply that opened the step (matched by name and
    arguments, so the order the calls happened to start in does not matter)."""
    reply = step[0].get("reply") if step and step[0].get("kind") == "engine" else None
    wanted = [(c["name"], c["arguments"]) for c in (reply or {}).get("tool_calls", [])]
    order: dict[str, int] = {}
    for record in step:
        event = record.get("event") if record.get("kind") == "event" else None
        if event is None or event.get("type") != "tool_call" or event["call_id"] in order:
            continue
        key = (event["name"], event["arguments"])
        index = next((i for i, w in enumerate(wanted) if w == key and i not in
                      order.values()), len(wanted) + len(order))
        order[event["call_id"]] = index
    return order


class RecordingEngine:
    """An ``Engine`` that records each request and its reply, then passes the reply on."""

    def __init__(self, inner: Engine, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    async def complete(self, adapter: str, messages: list[dict[str, Any]], *,
                       tools: list[dict[str, Any]] | None = None,
                       params: dict[str, Any] | None = None,
                       choices: list[str] | None = None,
                       on_delta: OnDelta | None = None,
                       extra: dict[str, Any] | None = None) -> Completion:
        """Record the request, ask the inner engine, record the reply (or the failure)."""
        record = self.recorder.exchange({"adapter": adapter, "messages": list(messages),
                                         "tools": tools, "params": params,
                                         "choices": choices, "extra": extra})
        try:
            completion = await self.inner.complete(adapter, messages, tools=tools,
                                                   params=params, choices=choices,
                                                   on_delta=on_delta, extra=extra)
        except Exception as exc:
            record["error"] = {"type": type(exc).__name__, "message": str(exc)}
            raise
        except BaseException:
            record["cancelled"] = True
            raise
        record["reply"] = reply_record(completion)
        return completion

    async def models(self) -> list[dict[str, Any]] | None:
        """The inner engine's model list (the adapters' windows come from it), recorded so a
        replay sizes the windows the same way."""
        listing = getattr(self.inner, "models", None)
        found = await listing() if listing is not None else None
        self.recorder.add({"kind": "models", "data": found})
        return found


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class RecordingSandbox:
    """A sandbox whose commands and file operations are recorded; everything else is the
    wrapped sandbox's."""

    def __init__(self, sandbox: Any, recorder: Recorder) -> None:
        self._sandbox = sandbox
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sandbox, name)

    async def _recorded(self, op: dict[str, Any], work: Any, describe: Any) -> Any:
        try:
            value = await work
        except Exception as exc:
            self._recorder.sandbox_op({**op, "error": str(exc)})
            raise
        self._recorder.sandbox_op({**op, **describe(value)})
        return value

    async def run(self, command: str, *, timeout: float | None = None,  # noqa: ASYNC109
                  on_output: Any = None, clean: bool = False) -> Any:
        """``Sandbox.run``, recorded with its output and exit code (and ``clean`` when set)."""
        op = {"op": "run", "command": command, "timeout": timeout,
              **({"clean": True} if clean else {})}
        return await self._recorded(
            op, self._sandbox.run(command, timeout=timeout, on_output=on_output, clean=clean),
            _command)

    async def list_dir(self, path: str = ".") -> Any:
        """``Sandbox.list_dir``, recorded like a command."""
        return await self._recorded({"op": "list_dir", "path": path},
                                    self._sandbox.list_dir(path), _command)

    async def read_file(self, path: str, **options: Any) -> bytes:
        """``Sandbox.read_file``, recorded by size and digest."""
        return await self._recorded({"op": "read_file", "path": path},
                                    self._sandbox.read_file(path, **options),
                                    lambda data: {"bytes": len(data), "sha256": _digest(data)})

    async def write_file(self, path: str, data: bytes, **options: Any) -> str:
        """``Sandbox.write_file``, recorded by size and digest."""
        return await self._recorded(
            {"op": "write_file", "path": path, "bytes": len(data), "sha256": _digest(data)},
            self._sandbox.write_file(path, data, **options), lambda where: {"where": where})

    async def upload(self, folder: str, entries: list[tuple[str, bytes, int]], *,
                     clear: bool = False) -> None:
        """``Sandbox.upload``, recorded by file names and digests (and ``clear`` when set)."""
        files = [{"path": p, "bytes": len(d), "sha256": _digest(d)} for p, d, _ in entries]
        op = {"op": "upload", "folder": folder, "files": files, **({"clear": True} if clear
                                                                    else {})}
        await self._recorded(op, self._sandbox.upload(folder, entries, clear=clear),
                             lambda _: {})


def _command(result: Any) -> dict[str, Any]:
    return {"output": result.output, "exit_code": result.exit_code,
            "timed_out": result.timed_out, "dropped_bytes": result.dropped_bytes,
            "shell_exited": result.shell_exited, "fresh_shell": result.fresh_shell}
