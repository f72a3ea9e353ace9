"""Hooks around every tool call: HCP command hooks and in-process plugin hooks.

Command hooks follow the Claude Code / Codex shape: the call is sent as JSON
on stdin; exit 0 allows (stdout JSON may deny, allow or give ``updatedInput``),
exit 2 blocks with stderr as the reason. A hook that crashes, cannot start or
times out follows its ``on_error`` (default ``block``).
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
from typing import Any

import anyio

from mol.hcp.files import command_files
from mol.hcp.schema import CommandHook, HookMatcher

log = logging.getLogger("mol.hooks")


@dataclass(frozen=True)
class ToolCallInfo:
    """A tool call as hooks see it."""

    name: str
    arguments: dict[str, Any]
    call_id: str
    adapter: str


@dataclass(frozen=True)
class Block:
    """A hook's verdict: refuse the call; the model reads ``reason``."""

    reason: str


@dataclass(frozen=True)
class Rewrite:
    """A hook's verdict: run the call with these arguments instead."""

    arguments: dict[str, Any]


@dataclass(frozen=True)
class Allow:
    """A hook's verdict: run the call, approving it even when policy says ``ask``."""

    reason: str = ""


@dataclass
class Verdict:
    """The combined outcome of the hooks of one event."""

    blocked: str | None = None
    arguments: dict[str, Any] | None = None
    approved: bool = False
    decisions: list[tuple[str, str, str]] = field(default_factory=list)
    """``(hook, decision, reason)`` for the events log."""


def matches(matcher: str, tool: str) -> bool:
    """Whether a hook matcher (glob; ``|`` separates alternatives) selects ``tool``."""
    if matcher in ("", "*"):
        return True
    return any(fnmatchcase(tool, alt.strip()) for alt in matcher.split("|"))


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable (plugin hooks may return awaitables)."""
    return await value if inspect.isawaitable(value) else value


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


async def call_plugin(impl: Any, hook: str, **kwargs: Any) -> Any:
    """One plugin's outcome of ``hook`` (awaited), or ``PluginFailed`` when it raised; the
    failure is logged with the plugin's name."""
    try:
        return await maybe_await(impl.function(*[kwargs[name] for name in impl.argnames]))
    except Exception as exc:
        failed = PluginFailed(impl.plugin_name, exc)
        log.warning("%s in %s", failed, hook)
        return failed


def _argv(hook: CommandHook, base_dir: Any) -> list[str]:
    refs = set(command_files(hook.command))
    return [str((base_dir / w).resolve()) if w in refs else w for w in shlex.split(hook.command)]


async def run_command(hook: CommandHook, payload: dict[str, Any], base_dir: Any) -> Any:
    """Run one command hook; return ``None``, ``Allow``, ``Block`` or ``Rewrite``."""
    data = json.dumps(payload).encode()
    try:
        process = await anyio.open_process(
            _argv(hook, base_dir), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=str(base_dir), start_new_session=True)
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
    return _parse_output(out.decode(errors="replace"))


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
    return Allow(reason) if hook.on_error == "allow" else Block(reason)


def _parse_output(stdout: str) -> Any:
    """Read a hook's JSON answer (Claude Code's ``hookSpecificOutput`` or the older shape)."""
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        answer = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(answer, dict):
        return None
    specific = answer.get("hookSpecificOutput") or {}
    decision = specific.get("permissionDecision") or answer.get("decision")
    reason = specific.get("permissionDecisionReason") or answer.get("reason") or ""
    if decision in ("deny", "block") or answer.get("continue") is False:
        return Block(reason or answer.get("stopReason") or "denied by hook")
    updated = specific.get("updatedInput")
    if isinstance(updated, dict):
        return Rewrite(updated)
    if decision in ("allow", "approve"):
        return Allow(reason)
    return None


async def run_command_hooks(
    matchers: list[HookMatcher], event: str, call: ToolCallInfo, base_dir: Any,
    session_id: str, extra: dict[str, Any] | None = None,
) -> Verdict:
    """Run every command hook of ``event`` matching the call, in order, until one blocks."""
    verdict = Verdict()
    arguments = call.arguments
    for matcher in matchers:
        if not matches(matcher.matcher, call.name):
            continue
        for hook in matcher.hooks:
            payload = {"session_id": session_id, "hook_event_name": event,
                       "tool_name": call.name, "tool_input": arguments,
                       "tool_use_id": call.call_id, "adapter": call.adapter,
                       "cwd": str(base_dir), **(extra or {})}
            outcome = await run_command(hook, payload, base_dir)
            if not apply(verdict, hook.command, outcome):
                return verdict
            arguments = verdict.arguments or arguments
    return verdict


def apply(verdict: Verdict, name: str, outcome: Any) -> bool:
    """Fold one hook outcome into ``verdict``; False when the call is now blocked."""
    if isinstance(outcome, Block):
        verdict.blocked = outcome.reason
        verdict.decisions.append((name, "block", outcome.reason))
        return False
    if isinstance(outcome, Rewrite):
        verdict.arguments = outcome.arguments
        verdict.decisions.append((name, "rewrite", ""))
    elif isinstance(outcome, Allow):
        verdict.approved = True
        verdict.decisions.append((name, "allow", outcome.reason))
    return True
