"""Hooks: HCP command hooks (the Claude Code / Codex shape) and plugin hook verdicts.

A command hook gets the event as JSON on stdin. Exit 0 goes on (stdout JSON
may deny, allow, give ``updatedInput`` or ``additionalContext``; for the events
that add context, plain stdout is context too); exit 2 blocks with stderr as
the reason. A hook that crashes, cannot start or times out follows its
``on_error`` (default ``block``).

The hooks of an artifact come in ``HookSet`` s: the HCP's own ``[hooks]``
(for every adapter, run in the artifact's folder) and each bundle's (for the
adapters that use the bundle, run in the bundle's folder with
``CLAUDE_PLUGIN_ROOT`` set). ``run_hooks`` runs one event over them.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import shlex
import signal
import subprocess
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import anyio

from mol.hcp.files import command_files
from mol.hcp.schema import CommandHook, HookMatcher, HooksConfig

CONTEXT_EVENTS = ("UserPromptSubmit", "SessionStart", "SubagentStart", "PreCompact")
"""Events whose hooks may add context for the model."""
STOP_EVENTS = ("Stop", "SubagentStop")
"""Events where ``continue: false`` means "stop", not "block"."""

log = logging.getLogger("mol.hooks")


@dataclass(frozen=True)
class ToolCallInfo:
    """A tool call as hooks see it."""

    name: str
    arguments: dict[str, Any]
    call_id: str
    adapter: str
    source: str = "builtin"
    """Where the tool comes from (``Tool.source``): ``plugin:NAME``, ``mcp:SERVER`` or
    ``builtin``."""


@dataclass(frozen=True)
class Block:
    """A hook's verdict: refuse the call; the model reads ``reason``."""

    reason: str
    failed: bool = False
    """The hook crashed or timed out (``on_error = "block"``) rather than deciding."""


@dataclass(frozen=True)
class Rewrite:
    """A hook's verdict: run the call with these arguments instead."""

    arguments: dict[str, Any]


@dataclass(frozen=True)
class Allow:
    """A hook's verdict: run the call, approving it even when policy says ``ask``."""

    reason: str = ""


@dataclass(frozen=True)
class Context:
    """A hook's verdict: add ``text`` to what the model reads this turn."""

    text: str


@dataclass
class Verdict:
    """The combined outcome of the hooks of one event."""

    blocked: str | None = None
    failed: bool = False
    """The block comes from a hook that failed, not from one that decided."""
    arguments: dict[str, Any] | None = None
    approved: bool = False
    context: list[str] = field(default_factory=list)
    decisions: list[tuple[str, str, str]] = field(default_factory=list)
    """``(hook, decision, reason)`` for the events log."""


@dataclass(frozen=True)
class HookSet:
    """Hooks from one place: the HCP's ``[hooks]`` or one bundle."""

    hooks: HooksConfig
    root: Path
    """Where the hooks run and their relative files are."""
    adapters: frozenset[str] | None = None
    """The adapters they run for; None: every adapter."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to the hooks' environment (``CLAUDE_PLUGIN_ROOT``...)."""

    def applies(self, adapter: str | None) -> bool:
        """Whether the set runs for ``adapter`` (None: an event before any adapter)."""
        return self.adapters is None or adapter is None or adapter in self.adapters


def matches(matcher: HookMatcher, subject: str) -> bool:
    """Whether a hook matcher (glob; ``|`` separates alternatives) selects ``subject``."""
    globs = matcher.globs()
    return not globs or any(fnmatchcase(subject, glob) for glob in globs)


@dataclass(frozen=True)
class PluginFailed:
    """A plugin hook that raised (or whose awaitable raised): the loop treats it as a
    block before a call and as a withheld result after it."""

    plugin: str
    error: BaseException

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} failed: {type(self.error).__name__}: {self.error}"


def plugin_impls(caller: Any) -> list[Any]:
    """The implementations of a pluggy hook, in the order pluggy calls them (newest first)."""
    return list(reversed(caller.get_hookimpls()))


@dataclass(frozen=True)
class ToolHooks:
    """The plugins' ``mol_before_tool_call`` and ``mol_after_tool_call`` implementations, in
    the order they run; read once per runtime (plugins load at its start)."""

    before: tuple[Any, ...] = ()
    after: tuple[Any, ...] = ()

    @classmethod
    def of(cls, relay: Any) -> ToolHooks:
        """The tool hooks of a plugin manager's hook relay (``PluginManager.hook``)."""
        return cls(tuple(plugin_impls(relay.mol_before_tool_call)),
                   tuple(plugin_impls(relay.mol_after_tool_call)))


async def call_plugin(impl: Any, hook: str, **kwargs: Any) -> Any:
    """One plugin's outcome of ``hook`` (awaited), or ``PluginFailed`` when it raised; the
    failure is logged with the plugin's name."""
    try:
        outcome = impl.function(*[kwargs[name] for name in impl.argnames])
        return await outcome if inspect.isawaitable(outcome) else outcome
    except Exception as exc:
        failed = PluginFailed(impl.plugin_name, exc)
        log.warning("%s in %s", failed, hook)
        return failed


def _argv(hook: CommandHook, root: Path) -> list[str]:
    refs = set(command_files(hook.command))
    return [str((root / w).resolve()) if w in refs else w for w in shlex.split(hook.command)]


async def run_command(hook: CommandHook, payload: dict[str, Any], root: Any,
                      env: dict[str, str] | None = None) -> Any:
    """Run one command hook in ``root``; return ``None``, ``Allow``, ``Block``, ``Rewrite``
    or ``Context``."""
    data = json.dumps(payload).encode()
    root = Path(root)
    try:
        process = await anyio.open_process(
            _argv(hook, root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=str(root), start_new_session=True,
            env={**os.environ, **env} if env else None)
    except OSError as exc:
        return _on_error(hook, f"cannot start: {exc.strerror or exc}")
    out, err = bytearray(), bytearray()
    try:
        with anyio.fail_after(hook.timeout):
            async with anyio.create_task_group() as group:
                group.start_soon(_drain, process.stdout, out)
                group.start_soon(_drain, process.stderr, err)
                try:
                    await process.stdin.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # the hook did not read its input; its exit code still counts
                await process.stdin.aclose()
            code = await process.wait()
    except TimeoutError:
        _kill_group(process.pid)
        await process.wait()
        return _on_error(hook, f"timed out after {hook.timeout:g} s")
    finally:
        await process.aclose()
    stderr = err.decode(errors="replace").strip()
    if code == 2:
        return Block(stderr or "blocked by hook")
    if code != 0:
        return _on_error(hook, f"exited with status {code}" + (f": {stderr}" if stderr else ""))
    return parse_output(out.decode(errors="replace"), str(payload.get("hook_event_name", "")))


async def _drain(stream: Any, into: bytearray) -> None:
    async for chunk in stream:
        into += chunk


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _on_error(hook: CommandHook, problem: str) -> Any:
    reason = f"hook {hook.command!r} {problem}"
    return Allow(reason) if hook.on_error == "allow" else Block(reason, failed=True)


def parse_output(stdout: str, event: str = "PreToolUse") -> Any:
    """Read a hook's answer (Claude Code's ``hookSpecificOutput`` or the older shape); plain
    text is context for the events that add context."""
    text = stdout.strip()
    answer = None
    if text.startswith("{"):
        try:
            answer = json.loads(text)
        except json.JSONDecodeError:
            answer = None
    if not isinstance(answer, dict):
        return Context(text) if text and event in CONTEXT_EVENTS else None
    specific = answer.get("hookSpecificOutput") or {}
    decision = specific.get("permissionDecision") or answer.get("decision")
    reason = specific.get("permissionDecisionReason") or answer.get("reason") or ""
    halted = answer.get("continue") is False and event not in STOP_EVENTS
    if decision in ("deny", "block") or halted:
        return Block(reason or answer.get("stopReason") or "denied by hook")
    updated = specific.get("updatedInput")
    if isinstance(updated, dict):
        return Rewrite(updated)
    if decision in ("allow", "approve"):
        return Allow(reason)
    added = specific.get("additionalContext")
    if isinstance(added, str) and added.strip() and event in CONTEXT_EVENTS:
        return Context(added.strip())
    return None


async def run_hooks(sets: list[HookSet], event: str, payload: dict[str, Any],
                    subject: str | None = None, adapter: str | None = None) -> Verdict:
    """Run every hook of ``event`` in the sets that apply to ``adapter`` and whose matcher
    selects ``subject`` (None: matchers are not consulted), in order, until one blocks.
    A rewrite of a tool's input is what the later hooks see."""
    verdict = Verdict()
    for hook_set in sets:
        if not hook_set.applies(adapter):
            continue
        for matcher in getattr(hook_set.hooks, event):
            if subject is not None and not matches(matcher, subject):
                continue
            for hook in matcher.hooks:
                if verdict.arguments is not None:
                    payload = {**payload, "tool_input": verdict.arguments}
                outcome = await run_command(hook, {**payload, "cwd": str(hook_set.root)},
                                            hook_set.root, hook_set.env)
                if not apply(verdict, hook.command, outcome):
                    return verdict
    return verdict


def apply(verdict: Verdict, name: str, outcome: Any) -> bool:
    """Fold one hook outcome into ``verdict``; False when the call is now blocked."""
    if isinstance(outcome, Block):
        verdict.blocked, verdict.failed = outcome.reason, outcome.failed
        verdict.decisions.append((name, "block", outcome.reason))
        return False
    if isinstance(outcome, Rewrite):
        verdict.arguments = outcome.arguments
        verdict.decisions.append((name, "rewrite", ""))
    elif isinstance(outcome, Allow):
        verdict.approved = True
        verdict.decisions.append((name, "allow", outcome.reason))
    elif isinstance(outcome, Context):
        verdict.context.append(outcome.text)
        verdict.decisions.append((name, "context", ""))
    return True
