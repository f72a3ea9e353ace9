"""mol's file and terminal tools served by the editor instead of the Docker sandbox, where
the artifact chooses it (``[sandbox] acp_client``) and the editor offers it (its
``clientCapabilities`` at ``initialize``).

``files`` (the editor reads and writes text files: ``fs/read_text_file``,
``fs/write_text_file``): ``read_file``, ``write_file`` and ``edit_file``, on paths inside the
session's folder (its ``cwd``) only; a write or an edit shows the editor its diff.
``terminal`` (``terminal/create`` and the rest): ``terminal`` runs ``bash -c COMMAND`` in
the session's folder, on the editor's machine (no sandbox), the editor showing its output
live; ``list_dir`` runs ``ls -la`` there.

The tools keep their names, arguments and policy (``ToolPolicy`` allow, ask, deny), and
their failures are results the model reads. They replace the sandbox's through the
session's ``tool_wrapper``.
"""

from __future__ import annotations

import logging
import posixpath
import shlex
from typing import Any

import anyio

from mol.acpagent.sdk import CLIENT_METHODS
from mol.core.errors import ClientError
from mol.core.tools import Tool, ToolContext, ToolResult, function_tool
from mol.sandboxes.result import escape_own_lines

log = logging.getLogger("mol.acp")

FILE_TOOLS = ("read_file", "write_file", "edit_file")
TERMINAL_TOOLS = ("terminal", "list_dir")
STOP_SEC = 5.0
"""How long killing and releasing an editor's terminal may take once a call ends."""


def _error(message: Any) -> ToolResult:
    return ToolResult(f"Error: {message}", is_error=True)


class ClientTools:
    """The editor's file system and terminals as mol's tools, for one session."""

    def __init__(self, peer: Any, session_id: str, cwd: str, updates: Any, *,
                 files: bool, terminal: bool, sandbox: Any) -> None:
        self.peer, self.session_id, self.cwd, self.updates = peer, session_id, cwd, updates
        self.sandbox = sandbox
        """The artifact's ``[sandbox]``: its command timeout and output cap apply here too."""
        names = [*(FILE_TOOLS if files else ()), *(TERMINAL_TOOLS if terminal else ())]
        self._tools = {name: function_tool(getattr(self, name), name=name, source="acp:client")
                       for name in names}

    @property
    def served(self) -> set[str]:
        """The names of the tools the editor serves."""
        return set(self._tools)

    def wrap(self, adapter: str, tools: dict[str, Tool]) -> dict[str, Tool]:
        """``tools`` with the sandbox's file and terminal tools replaced by the editor's
        (a ``ToolWrapper``: the adapter's policy decides which it sees, as before)."""
        return {name: self._tools.get(name, tool) for name, tool in tools.items()}

    def where(self, path: str) -> str:
        """``path`` (relative to the session's folder, or absolute inside it) as an absolute
        path; ``ValueError`` for a path outside the folder."""
        full = posixpath.normpath(posixpath.join(self.cwd, path))
        if full != self.cwd and not full.startswith(self.cwd.rstrip("/") + "/"):
            raise ValueError(f"{path} is outside the session's folder {self.cwd}")
        return full

    async def _read(self, path: str) -> str:
        response = await self.peer.request(CLIENT_METHODS["fs_read_text_file"],
                                           {"sessionId": self.session_id, "path": path})
        return response.content

    async def _write(self, path: str, content: str) -> None:
        await self.peer.request(CLIENT_METHODS["fs_write_text_file"],
                                {"sessionId": self.session_id, "path": path, "content": content})

    async def read_file(self, path: str) -> ToolResult:
        """Read a text file of the project open in the editor (its unsaved changes included).

        Args:
            path: Path relative to the project's folder (or absolute inside it).
        """
        from mol.sandboxes.output import OutputCap

        try:
            text = await self._read(self.where(path))
        except (ValueError, ClientError) as exc:
            return _error(exc)
        cap = OutputCap(self.sandbox.max_output_bytes)
        cap.feed(text.encode("utf-8"))
        shown = cap.text()
        if cap.dropped:
            shown += (f"\n[File truncated: {cap.dropped} of {cap.total} bytes dropped from the "
                      "middle; read it in parts with the terminal (sed -n, grep).]")
        return ToolResult(shown, data={"path": path})

    async def write_file(self, path: str, content: str, context: ToolContext) -> ToolResult:
        """Create or overwrite a file of the project open in the editor.

        Args:
            path: Path relative to the project's folder (or absolute inside it).
            content: The complete new content of the file.
        """
        try:
            full = self.where(path)
        except ValueError as exc:
            return _error(exc)
        try:
            old: str | None = await self._read(full)
        except ClientError:
            old = None  # a new file
        try:
            await self._write(full, content)
        except ClientError as exc:
            return _error(exc)
        await self._show_diff(context.call_id, full, old, content)
        return ToolResult(f"Wrote {len(content.encode('utf-8'))} bytes to {path}.",
                          data={"path": full})

    async def edit_file(self, path: str, old: str, new: str, context: ToolContext) -> ToolResult:
        """Replace one exact occurrence of a string in a file of the project open in the
        editor.

        The old string must occur exactly once (include surrounding lines to make it
        unique); otherwise nothing changes and you are told how often it occurs.

        Args:
            path: Path relative to the project's folder (or absolute inside it).
            old: The exact text to replace, whitespace included.
            new: The replacement text.
        """
        if not old:
            return _error("old must not be empty")
        try:
            full = self.where(path)
            text = await self._read(full)
        except (ValueError, ClientError) as exc:
            return _error(exc)
        count = text.count(old)
        if count != 1:
            found = "does not occur" if count == 0 else f"occurs {count} times"
            return _error(f"the old string {found} in {path}; it must occur exactly once "
                          "(add surrounding lines to make it unique). The file is unchanged.")
        edited = text.replace(old, new, 1)
        try:
            await self._write(full, edited)
        except ClientError as exc:
            return _error(exc)
        line = text[:text.index(old)].count("\n") + 1
        await self._show_diff(context.call_id, full, text, edited, line)
        return ToolResult(f"Replaced 1 occurrence in {path} (at line {line}).",
                          data={"path": full, "line": line})

    async def _show_diff(self, call_id: str, path: str, old: str | None, new: str,
                         line: int | None = None) -> None:
        diff: dict[str, Any] = {"type": "diff", "path": path, "newText": new}
        if old is not None:
            diff["oldText"] = old
        location: dict[str, Any] = {"path": path, **({"line": line} if line else {})}
        await self.updates.attach(call_id, diff, [location])

    async def terminal(self, command: str, context: ToolContext,
                       timeout: float | None = None) -> ToolResult:  # noqa: ASYNC109
        """Run a bash command in the project's folder, in a terminal of the editor, and get
        its output and exit code.

        Each command runs in a fresh shell: change directories or set variables within the
        command itself. stderr is merged into the output; long output keeps its end.

        Args:
            command: The bash command (pipes, &&, multiple lines allowed).
            timeout: Seconds before the command is killed (default: the sandbox's timeout).
        """
        if timeout is not None and timeout <= 0:
            return _error("timeout must be a positive number of seconds")
        return await self._run(["-c", command], context.call_id,
                               timeout or self.sandbox.timeout_sec)

    async def list_dir(self, context: ToolContext, path: str = ".") -> ToolResult:
        """List a folder of the project open in the editor (ls -la).

        Args:
            path: Folder relative to the project's folder (or absolute inside it); default:
                the project's folder.
        """
        try:
            full = self.where(path)
        except ValueError as exc:
            return _error(exc)
        return await self._run(["-c", f"ls -la -- {shlex.quote(full)}"], context.call_id,
                               self.sandbox.timeout_sec)

    async def _run(self, args: list[str], call_id: str, timeout: float) -> ToolResult:  # noqa: ASYNC109
        try:
            created = await self.peer.request(CLIENT_METHODS["terminal_create"], {
                "sessionId": self.session_id, "command": "bash", "args": args, "cwd": self.cwd,
                "outputByteLimit": self.sandbox.max_output_bytes})
        except ClientError as exc:
            return _error(exc)
        terminal = {"sessionId": self.session_id, "terminalId": created.terminal_id}
        try:
            await self.updates.attach(call_id, {"type": "terminal",
                                                "terminalId": created.terminal_id})
            exited, timed_out = None, True
            with anyio.move_on_after(timeout):
                exited = await self.peer.request(CLIENT_METHODS["terminal_wait_for_exit"],
                                                 terminal)
                timed_out = False
            if timed_out:
                await self.peer.request(CLIENT_METHODS["terminal_kill"], terminal)
            output = await self.peer.request(CLIENT_METHODS["terminal_output"], terminal)
        except ClientError as exc:
            return _error(exc)
        finally:
            with anyio.move_on_after(STOP_SEC, shield=True):
                await self._release(terminal)
        status = output.exit_status or exited
        code = status.exit_code if status is not None else None
        signal = status.signal if status is not None else None
        parts = [escape_own_lines(output.output.rstrip("\n"))] if output.output else []
        if timed_out:  # killed, whatever it printed or its status says
            parts.append(f"[Timed out after {timeout:g} s: the command was killed.]")
        else:
            parts.append(f"[exit code: {'none' if code is None else code}]")
            if signal:
                parts.append(f"[The command was killed by signal {signal}.]")
        if output.truncated:
            parts.append(f"[Output truncated: its beginning was dropped (the last "
                         f"{self.sandbox.max_output_bytes} bytes are kept).]")
        return ToolResult("\n".join(parts), is_error=timed_out or code is None,
                          data={"exit_code": code, "timed_out": timed_out})

    async def _release(self, terminal: dict[str, Any]) -> None:
        try:
            await self.peer.request(CLIENT_METHODS["terminal_release"], terminal)
        except ClientError as exc:
            log.warning("the editor's terminal %s was not released: %s",
                        terminal["terminalId"], exc)
