"""Built-in plugin: the terminal and file tools, run in the session's Docker sandbox.

Tools: ``terminal``, ``read_file``, ``write_file``, ``edit_file``, ``list_dir``.
Every call of a session uses the same sandbox (``context.resources``), opened
on first use with the HCP's ``[sandbox]`` settings and removed when the
session ends, so ``cd``, ``export`` and files carry over between turns.

What a tool returns is what the model reads: the output, the exit code, and a
plain note on a timeout, on truncation or on a replaced sandbox. A failure
(a missing file, a path outside the workspace, no Docker engine) is an error
result the model reads, never an exception.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mol.core.errors import SandboxError
from mol.core.tools import ToolContext, ToolResult
from mol.plugins import hookimpl

if TYPE_CHECKING:
    from mol.sandboxes.sandbox import Sandbox

RESOURCE = "sandbox"
"""Key of the session's sandbox in ``ToolContext.resources``."""


async def session_sandbox(context: ToolContext) -> Sandbox:
    """The session's sandbox, started on first use."""
    from mol.hcp.schema import SandboxConfig
    from mol.sandboxes.sandbox import open_sandbox

    doc = getattr(context.artifact, "doc", None)
    config = doc.sandbox if doc is not None else SandboxConfig()
    return await context.resources.get(
        RESOURCE, lambda: open_sandbox(config, session_id=context.session_id,
                                       pool=context.sandbox_pool))


def _error(message: Any) -> ToolResult:
    return ToolResult(f"Error: {message}", is_error=True)


async def terminal(command: str, context: ToolContext,
                   timeout: float | None = None) -> ToolResult:  # noqa: ASYNC109
    """Run a bash command in your sandbox's persistent shell and get its output and exit code.

    The working directory, environment variables and shell state carry over
    between calls, as in a terminal. stdin is empty (nothing waits for input);
    stderr is merged into the output. Long output keeps its beginning and end.

    Args:
        command: The bash command (pipes, &&, multiple lines allowed).
        timeout: Seconds before the command and all its processes are killed
            (default: the sandbox's timeout).
    """
    if timeout is not None and timeout <= 0:
        return _error("timeout must be a positive number of seconds")
    try:
        sandbox = await session_sandbox(context)
        result = await sandbox.run(command, timeout=timeout)
    except (SandboxError, ValueError) as exc:
        return _error(exc)
    # A non-zero exit is an ordinary answer; no answer at all is a failed call.
    failed = result.timed_out or result.exit_code is None
    return ToolResult(result.render(), is_error=failed, data={
        "exit_code": result.exit_code, "timed_out": result.timed_out,
        "dropped_bytes": result.dropped_bytes, "duration": result.duration})


async def read_file(path: str, context: ToolContext) -> ToolResult:
    """Read a text file from your sandbox's workspace.

    Args:
        path: Path relative to the workspace (or absolute inside it).
    """
    from mol.sandboxes.output import OutputCap

    try:
        sandbox = await session_sandbox(context)
        data = await sandbox.read_file(path)
    except SandboxError as exc:
        return _error(exc)
    cap = OutputCap(sandbox.config.max_output_bytes)
    cap.feed(data)
    text = cap.text()
    if cap.dropped:
        text += (f"\n[File truncated: {cap.dropped} of {cap.total} bytes dropped from the "
                 "middle; use terminal with sed -n or grep to see the rest.]")
    return ToolResult(text, data={"path": path, "bytes": len(data)})


async def write_file(path: str, content: str, context: ToolContext) -> ToolResult:
    """Create or overwrite a file in your sandbox's workspace (parent folders are created).

    Args:
        path: Path relative to the workspace (or absolute inside it).
        content: The complete new content of the file.
    """
    data = content.encode("utf-8")
    try:
        sandbox = await session_sandbox(context)
        where = await sandbox.write_file(path, data)
    except SandboxError as exc:
        return _error(exc)
    return ToolResult(f"Wrote {len(data)} bytes to {where}.", data={"path": where})


async def edit_file(path: str, old: str, new: str, context: ToolContext) -> ToolResult:
    """Replace one exact occurrence of a string in a file of your sandbox's workspace.

    The old string must occur exactly once (include surrounding lines to make
    it unique); otherwise nothing changes and you are told how often it occurs.

    Args:
        path: Path relative to the workspace (or absolute inside it).
        old: The exact text to replace, whitespace included.
        new: The replacement text.
    """
    if not old:
        return _error("old must not be empty")
    try:
        sandbox = await session_sandbox(context)
        text = (await sandbox.read_file(path)).decode("utf-8")
    except SandboxError as exc:
        return _error(exc)
    except UnicodeDecodeError:
        return _error(f"{path} is not UTF-8 text; edit it with terminal instead")
    count = text.count(old)
    if count != 1:
        where = "does not occur" if count == 0 else f"occurs {count} times"
        return _error(f"the old string {where} in {path}; it must occur exactly once "
                      "(add surrounding lines to make it unique). The file is unchanged.")
    try:
        await sandbox.write_file(path, text.replace(old, new, 1).encode("utf-8"))
    except SandboxError as exc:
        return _error(exc)
    line = text[:text.index(old)].count("\n") + 1
    return ToolResult(f"Replaced 1 occurrence in {path} (at line {line}).",
                      data={"path": path, "line": line})


async def list_dir(context: ToolContext, path: str = ".") -> ToolResult:
    """List a folder of your sandbox's workspace (ls -la).

    Args:
        path: Folder relative to the workspace (or absolute inside it); default: the workspace.
    """
    try:
        sandbox = await session_sandbox(context)
        result = await sandbox.list_dir(path)
    except SandboxError as exc:
        return _error(exc)
    if result.exit_code != 0:
        return _error(result.render())
    return ToolResult(result.output, data={"path": path})


TOOLS = (terminal, read_file, write_file, edit_file, list_dir)


@hookimpl
def mol_register_tools(register: Any) -> None:
    """Register the sandbox tools."""
    for tool in TOOLS:
        register(tool)
