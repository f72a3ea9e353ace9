"""One ACP session of a ``mol acp`` process: a stored conversation it holds, and its prompts.

While the session is open, its keeper task (in the agent's task group) owns what it
opened: the store's lease on the conversation (another ``mol acp``, ``mol chat`` or server
replica cannot write it meanwhile), the editor's own MCP servers, and the runtime session
(its sandbox). A prompt runs in the request's task; ``session/cancel`` cancels it, the
turn is then stored as interrupted and the prompt answered ``cancelled``.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import anyio

from mol.acpagent import permission
from mol.acpagent.clienttools import ClientTools
from mol.acpagent.inputs import builtin
from mol.acpagent.updates import Updates, stop_reason
from mol.core.errors import ClientError, ConversationError
from mol.runtime import Conversation, Recorder, held, open_mcp_servers

log = logging.getLogger("mol.acp")


class AgentSession:
    """An open ACP session: its conversation, the runtime session that runs its turns, and
    the prompt running, if any."""

    def __init__(self, agent: Any, session_id: str, cwd: str, servers: dict[str, Any]) -> None:
        self.agent = agent
        self.id = session_id
        self.cwd = cwd
        self.servers = servers
        """The editor's MCP servers, by name (``MCPServerConfig``)."""
        self.session: Any = None
        """The runtime ``Session``, once the keeper opened it."""
        self.updates = Updates(agent.peer, session_id, self._locate)
        self.tools = self._client_tools()
        self._running: anyio.CancelScope | None = None
        self._closing = anyio.Event()
        self._closed = anyio.Event()

    def _client_tools(self) -> ClientTools | None:
        sandbox = self.agent.artifact.doc.sandbox
        offered = self.agent.offers
        files = "files" in sandbox.acp_client and offered("files")
        terminal = "terminal" in sandbox.acp_client and offered("terminal")
        for kind, served in (("files", files), ("terminal", terminal)):
            if kind in sandbox.acp_client and not served:
                log.warning("the editor offers no %s: the sandbox serves those tools", kind)
        if not (files or terminal):
            return None
        return ClientTools(self.agent.peer, self.id, self.cwd, self.updates, files=files,
                           terminal=terminal, sandbox=sandbox)

    def _locate(self, tool: str, path: str) -> str:
        """Where a file tool's path is: in the editor's folder when the editor serves the
        tool, else in the sandbox's workspace."""
        import posixpath

        if self.tools is not None and tool in self.tools.served:
            return posixpath.normpath(posixpath.join(self.cwd, path))
        return posixpath.normpath(posixpath.join(self.agent.artifact.doc.sandbox.workspace,
                                                 path))

    async def keep(self, load: bool, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Open the session (``load``: the stored conversation, else a new one) and hold it
        until ``close()``; started in the agent's task group."""
        agent = self.agent
        try:
            async with AsyncExitStack() as stack:
                await stack.enter_async_context(held(agent.store, self.id, agent.owner,
                                                     agent.artifact.doc.session.lease))
                conversation = (await agent.store.load(self.id) if load
                                else Conversation(id=self.id))
                toolsets = []
                if self.servers:
                    toolsets.append(await stack.enter_async_context(open_mcp_servers(
                        agent.artifact, self.servers, engine=agent.runtime.engine)))
                self.session = await stack.enter_async_context(agent.runtime.session(
                    conversation, observers=[self.updates], toolsets=toolsets,
                    checkpoint=Recorder(agent.store, agent.artifact.digest).checkpoint,
                    approve=partial(permission.ask, agent.peer, self.id, self.updates),
                    tool_wrapper=self.tools.wrap if self.tools is not None else None))
                task_status.started(self)
                await self._closing.wait()
        finally:
            self._closed.set()

    async def close(self) -> None:
        """End the session in this process (its prompt cancelled, its lease given back)."""
        if self._running is not None:
            self._running.cancel()
        self._closing.set()
        await self._closed.wait()

    def cancel(self) -> None:
        """Cancel the prompt running, if any (``session/cancel``)."""
        if self._running is not None:
            self._running.cancel()

    async def prompt(self, text: str) -> dict[str, Any]:
        """Run one prompt's turn; ACP's ``PromptResponse``."""
        if self._running is not None:
            raise ConversationError(f"sessionId: a prompt of session {self.id} is running; "
                                    "cancel it or wait for its answer", field="sessionId")
        if self.agent.ending:  # arrived as the editor closed its end: nobody waits for it
            return {"stopReason": "cancelled"}
        self.updates.begin()
        result = None
        with anyio.CancelScope() as scope:
            self._running = scope
            try:
                own = builtin(text)
                result = await (self._compact(own[1]) if own else
                                self.session.turn(text, stream=True))
            finally:
                self._running = None
                if result is None:  # cancelled, or failed: no call stays open in the editor
                    await self._end_open("cancelled" if scope.cancel_called
                                         else "the turn failed")
        if result is None:
            return {"stopReason": "cancelled"}
        if isinstance(result, dict):
            return result
        meta = {"mol": {"adapter": result.adapter, "route": result.route}}
        return {"stopReason": stop_reason(result.stopped, self.updates.finish_reason),
                "_meta": meta}

    async def _end_open(self, why: str) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self.updates.end_open(why)
            except ClientError as exc:  # the editor is gone: nothing to show it
                log.info("open tool calls not ended in the editor: %s", exc)

    async def _compact(self, instructions: str) -> dict[str, Any]:
        """``/compact``: every adapter's view compacted now; what it did, as a message."""
        done = await self.session.compact(None, instructions)
        lines = [f"Compacted {e.adapter}: about {e.tokens_before} -> {e.tokens_after} tokens."
                 for e in done]
        await self.updates.message("\n".join(lines) or "Nothing to compact (every view is "
                                   "short, or a PreCompact hook kept it).")
        return {"stopReason": "end_turn"}
