"""Replay: re-drive a recorded episode through the harness, with no model and no Docker.

The harness runs the episode's turn again under an artifact (the recording's, or an
edited one) with three stand-ins: ``ReplayEngine`` compares each request with the
recorded one and answers with the recorded reply; ``ReplayTools`` answers each tool call
with the recorded result (only the built-in skill tools run for real: they read the
artifact, which is what an edit may change); ``RecordedToolset`` offers the MCP tools the
recording saw. Hooks run for real. The first request that differs ends the replay as
``diverged``, naming the request, the hop, the adapter, where in the request it differs
and a short diff; a replay that makes exactly the recorded requests is ``identical``.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict, deque
from dataclasses import asdict, dataclass, replace
from typing import Any

from mol.core import errors
from mol.core.errors import SandboxError
from mol.core.tools import Tool, ToolContext, ToolResult
from mol.eval.trajectories.diff import hop_of, request_difference
from mol.eval.trajectories.format import Trajectory, dumps
from mol.eval.trajectories.recording import numbered_ids
from mol.runtime import Completion, OnDelta, ToolCall, Usage

LIVE_TOOLS = ("load_skill", "read_skill_file")
"""Built-in tools that replay runs for real (unless copying into the sandbox)."""
LIVE_SOURCE = "plugin:mol.plugins.builtin.skills"


@dataclass
class Divergence:
    """Where a replay first differs from its recording."""

    request: int
    """1-based number of the engine request that differs (or would have come next)."""
    hop: str
    """``route``, ``answer`` or ``summary``: the hop the recording made at that request."""
    adapter: str
    where: str
    """``adapter``, ``messages[3] (tool)``, ``tools``, ``params``, ``choices``, ``tool call
    NAME``, ``extra request`` or ``missing request``."""
    diff: str
    replay_adapter: str = ""


@dataclass
class ReplayResult:
    """The verdict of one episode's replay."""

    task: str
    epoch: int
    verdict: str
    """``identical``, ``diverged``, ``skipped`` (nothing to re-drive: an oracle episode
    or none recorded) or ``error``."""
    requests: int = 0
    """Engine requests the replay made and found equal to the recording."""
    recorded: int = 0
    """Engine requests in the recording."""
    divergence: Divergence | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-able data (``mol eval replay --json``)."""
        return asdict(self)


class _Diverged(Exception):
    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.where)
        self.divergence = divergence


class _Ended(Exception):
    """The recording stops here: the episode ran out of time at this point."""


class _Replayed(Exception):
    """A tool exception as recorded (its text is the recorded message)."""


class _State:
    """What the stand-ins share: the next request, a divergence found by a tool, the end."""

    def __init__(self, exchanges: list[dict[str, Any]]) -> None:
        self.exchanges = exchanges
        self.next = 0
        self.pending: Divergence | None = None
        self.ended = False

    def recorded(self, index: int) -> tuple[str, str]:
        if index < len(self.exchanges):
            record = self.exchanges[index]
            return record.get("purpose", ""), record["request"]["adapter"]
        return "", ""

    def check(self) -> None:
        if self.pending is not None:
            raise _Diverged(self.pending)
        if self.ended:
            raise _Ended


class ReplayEngine:
    """An ``Engine`` answering from a recording, as long as the requests are the same."""

    def __init__(self, state: _State, artifact: Any,
                 models: list[dict[str, Any]] | None = None) -> None:
        self.state = state
        self.artifact = artifact
        self.listed = models
        """The engine's model list as the episode recorded it (the adapters' windows)."""

    async def models(self) -> list[dict[str, Any]] | None:
        """The recorded model list: the windows are sized as they were."""
        return self.listed

    async def complete(self, adapter: str, messages: list[dict[str, Any]], *,
                       tools: list[dict[str, Any]] | None = None,
                       params: dict[str, Any] | None = None,
                       choices: list[str] | None = None,
                       on_delta: OnDelta | None = None,
                       extra: dict[str, Any] | None = None) -> Completion:
        """The recorded reply to this request, or ``_Diverged`` when the request differs."""
        state = self.state
        state.check()
        index = state.next
        request = {"adapter": adapter, "messages": messages, "tools": tools,
                   "params": params, "choices": choices, "extra": extra}
        if index >= len(state.exchanges):
            raise _Diverged(Divergence(index + 1, hop_of(request, self.artifact), adapter,
                                       "extra request", "the recording ends before this "
                                       f"request ({len(state.exchanges)} requests)", adapter))
        record = state.exchanges[index]
        found = request_difference(record["request"], request)
        if found is not None:
            hop, recorded_adapter = state.recorded(index)
            raise _Diverged(Divergence(index + 1, hop, recorded_adapter, *found, adapter))
        state.next += 1
        if "reply" in record:
            return _completion(record["reply"])
        if "error" in record:
            kind = getattr(errors, record["error"]["type"], errors.EngineError)
            raise (kind if isinstance(kind, type) and issubclass(kind, errors.EngineError)
                   else errors.EngineError)(record["error"]["message"])
        raise _Ended


def _completion(reply: dict[str, Any]) -> Completion:
    usage = reply.get("usage") or {}
    return Completion(reply.get("content") or "",
                      [ToolCall(c["id"], c["name"], c["arguments"]) for c in
                       reply.get("tool_calls") or []],
                      reply.get("finish_reason"),
                      Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0,
                            usage.get("cached_tokens")), reasoning=reply.get("reasoning") or "")


class ReplayTools:
    """The harness's ``tool_wrapper`` for a replay: calls answered from the recording."""

    def __init__(self, trajectory: Trajectory, state: _State) -> None:
        self.state = state
        self.results: dict[tuple[str, str, str], deque[dict[str, Any]]] = defaultdict(deque)
        for record in trajectory.of("tool"):
            key = (record["adapter"], record["name"], dumps(record["arguments"]))
            self.results[key].append(record)

    def wrap(self, adapter: str, tools: dict[str, Tool]) -> dict[str, Tool]:
        """``tools`` with every call served from the recording but the live ones'."""
        return {name: replace(tool, call=self._call(tool)) for name, tool in tools.items()}

    def _call(self, tool: Tool) -> Any:
        async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
            if tool.source == LIVE_SOURCE and tool.name in LIVE_TOOLS and not arguments.get(
                    "to_workspace"):
                return await tool.call(arguments, context)
            queue = self.results.get((context.adapter, tool.name, dumps(arguments)))
            if not queue:
                if self.state.pending is None:
                    hop, recorded = self.state.recorded(self.state.next)
                    self.state.pending = Divergence(
                        self.state.next + 1, hop or "answer", recorded or context.adapter,
                        f"tool call {tool.name}", f"{tool.name} {dumps(arguments)[:300]} "
                        "was not called in the recording", context.adapter)
                return ToolResult("Error: replay: this call is not in the recording",
                                  is_error=True)
            record = queue.popleft()
            if "result" in record:
                return ToolResult(record["result"]["content"], record["result"]["is_error"])
            if "raised" in record:
                raise _Replayed(record["raised"])
            self.state.ended = True  # the episode's time ran out during this call
            return ToolResult("Error: replay: the recording ends here", is_error=True)

        return call


class RecordedToolset:
    """The toolset (MCP) tools the recording offered, for the servers the artifact still
    gives each adapter; a server the recording never saw is a divergence."""

    def __init__(self, trajectory: Trajectory, state: _State, artifact: Any) -> None:
        self.catalog = trajectory.catalog()
        self.state = state
        self.artifact = artifact

    async def tools(self, adapter: str) -> list[Tool]:
        """The recorded tools of ``adapter``'s servers."""
        doc = self.artifact.doc
        wanted = {name for name in doc.adapter(adapter).mcp_servers
                  if doc.mcp_servers[name].enabled}
        recorded = self.catalog.get(adapter, [])
        seen = {t["source"][4:] for t in recorded if t["source"].startswith("mcp:")}
        if wanted - seen and self.state.pending is None:
            hop, name = self.state.recorded(self.state.next)
            self.state.pending = Divergence(
                self.state.next + 1, hop, name or adapter, f"adapters.{adapter}.mcp_servers",
                f"the recording has no tools of {sorted(wanted - seen)}", adapter)
        return [Tool(t["name"], t["description"], t["parameters"], _unrecorded, t["source"])
                for t in recorded if t["source"][4:] in wanted]


async def _unrecorded(arguments: dict[str, Any], context: ToolContext) -> Any:
    raise _Replayed("replay: this MCP tool has no recorded result")


class _NoSandbox:
    """The session's sandbox during a replay: there is none."""

    def __getattr__(self, name: str) -> Any:
        raise SandboxError("a replay runs no sandbox (every sandbox result is recorded)")


async def replay_episode(trajectory: Trajectory, artifact: Any,
                         plugins: Any = None) -> ReplayResult:
    """Re-drive one recorded episode under ``artifact``; never raises for the episode's
    own problems (they are an ``error`` verdict)."""
    from mol.core.tools import Resources
    from mol.plugins.builtin.sandbox import RESOURCE
    from mol.runtime import Runtime

    header = trajectory.header
    exchanges = trajectory.of("engine")
    result = ReplayResult(header["task"], header["epoch"], "identical", 0, len(exchanges))
    if header.get("agent") != "mol":
        result.verdict, result.note = "skipped", f"agent {header.get('agent')}: no turn to replay"
        return result
    ended = trajectory.result
    if ended.get("outcome") == "error" and ended.get("reason") not in ("engine", "verifier"):
        result.verdict = "skipped"
        result.note = f"the episode failed outside its turn ({ended.get('reason')}): " \
                      f"{str(ended.get('error'))[:200]}"
        return result
    state = _State(exchanges)
    resources = Resources()
    await resources.get(RESOURCE, lambda: contextlib.nullcontext(_NoSandbox()))
    listed = trajectory.of("models")
    engine = ReplayEngine(state, artifact, listed[0].get("data") if listed else None)
    runtime = Runtime(artifact, engine=engine, plugins=plugins,
                      toolsets=[RecordedToolset(trajectory, state, artifact)])
    try:
        async with runtime.session(resources=resources, call_ids=numbered_ids(),
                                   tool_wrapper=ReplayTools(trajectory, state).wrap) as session:
            await session.turn(header["instruction"], adapter=header.get("adapter"))
        state.check()
        if state.next < len(exchanges):
            hop, adapter = state.recorded(state.next)
            raise _Diverged(Divergence(state.next + 1, hop, adapter, "missing request",
                                       f"the replay made {state.next} of the "
                                       f"{len(exchanges)} recorded requests"))
    except _Diverged as exc:
        result.verdict, result.divergence = "diverged", exc.divergence
    except _Ended:
        result.note = f"the recording ends at request {state.next + 1} (the episode ran out " \
                      "of time there)"
    except errors.EngineError as exc:
        if not (state.next == len(exchanges) and "error" in exchanges[-1]):
            result.verdict, result.note = "error", f"{type(exc).__name__}: {exc}"
        else:  # the recorded episode ended with this engine error too
            result.note = f"the recording ends with the engine error it replays: {exc}"
    except Exception as exc:  # a replay never takes the others down with it
        result.verdict, result.note = "error", f"{type(exc).__name__}: {exc}"
    result.requests = state.next
    return result


async def replay_run(run: Any, artifact: Any = None) -> list[ReplayResult]:
    """Replay every recorded episode of a run folder under ``artifact`` (default: the HCP
    the run recorded, from its snapshot), task by task."""
    from pathlib import Path

    from mol.eval.runner import SNAPSHOT
    from mol.eval.store import Store
    from mol.eval.trajectories.format import read
    from mol.hcp.snapshot import load_snapshot
    from mol.plugins.manager import PluginManager

    run = Path(run)
    with Store(run, create=False) as store:
        episodes = store.episodes()
    artifact = artifact or load_snapshot(run / SNAPSHOT)
    plugins = PluginManager.for_artifact(artifact)
    results = []
    for episode in episodes:
        if episode.trajectory is None:
            results.append(ReplayResult(episode.task, episode.epoch, "skipped",
                                        note="no trajectory was recorded (--no-record)"))
            continue
        results.append(await replay_episode(read(run / episode.trajectory), artifact, plugins))
    return results
