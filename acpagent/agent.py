"""The agent side of ACP: each method the editor calls, answered by mol.

``initialize`` says what mol offers (session loading, text and embedded resources in
prompts, MCP servers over stdio and streamable HTTP) and remembers what the editor offers
(its file system and terminals); ``session/new`` and ``session/load`` open a session (a
loaded one replays its history first), ``session/prompt`` runs a turn, ``session/cancel``
stops it. A method mol does not answer is ``-32601``; the params of one it does are read
with the SDK's models, and anything wrong is an error naming the field.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any

import anyio
import anyio.lowlevel

from mol.acpagent import sdk
from mol.acpagent.inputs import available_commands, client_servers, prompt_text
from mol.acpagent.session import AgentSession
from mol.core import __version__
from mol.core.errors import ConversationError, MolError, SessionNotFound, exception_leaves

log = logging.getLogger("mol.acp")

METHODS = sdk.AGENT_METHODS


class Agent:
    """Answers one editor's requests on one connection (``handle``)."""

    def __init__(self, artifact: Any, runtime: Any, store: Any, group: Any, wire: Any,
                 owner: str) -> None:
        self.artifact, self.runtime, self.store = artifact, runtime, store
        self.group = group
        """The task group the sessions' keepers run in."""
        self.wire = wire
        self.owner = owner
        """Who holds the leases of this process's sessions (``mol.runtime.new_owner``)."""
        self.peer: Any = None
        """The editor's side (``sdk.Peer``), once connected."""
        self.client: Any = None
        """The editor's ``clientCapabilities``, once it called ``initialize``."""
        self.sessions: dict[str, AgentSession] = {}
        self.ending = False
        """The editor closed its end: prompts are cancelled, other requests still answered."""
        self._in_flight = 0
        self._settled = anyio.Event()
        self._requests = {
            METHODS["initialize"]: self.initialize, METHODS["session_new"]: self.new_session,
            METHODS["session_load"]: self.load_session, METHODS["session_prompt"]: self.prompt}

    async def handle(self, method: str, params: Any, is_notification: bool) -> Any:
        """Answer one request (its result), or take one notification (None)."""
        if is_notification:
            if method == METHODS["session_cancel"]:
                self.cancel(params)
            else:
                log.debug("ignored notification %s", method)
            return None
        self._in_flight += 1  # until the wire has written its answer (``answered``)
        answer = self._requests.get(method)
        if answer is None:
            raise sdk.method_not_found(method)
        if self.client is None and method != METHODS["initialize"]:
            raise sdk.rpc_error(ConversationError(f"{method}: call initialize first"))
        try:
            return await answer(sdk.parsed(method, params), params)
        except MolError as exc:
            raise sdk.rpc_error(exc) from exc

    def answered(self) -> None:
        """The wire wrote the answer to one of the editor's requests."""
        self._in_flight -= 1
        self._settled.set()

    async def settle(self) -> None:
        """Once the editor closed its end: cancel the prompts running, and wait until every
        request read is answered (a prompt with ``cancelled``)."""
        self.ending = True
        # Requests read last have their tasks, not yet started: let them count themselves.
        await anyio.lowlevel.checkpoint()
        while self._in_flight > 0:
            for session in self.sessions.values():
                session.cancel()
            self._settled = anyio.Event()
            await self._settled.wait()

    def offers(self, kind: str) -> bool:
        """Whether the editor serves ``files`` (reading and writing) or ``terminal``."""
        if kind == "terminal":
            return bool(self.client.terminal)
        fs = self.client.fs
        return bool(fs and fs.read_text_file and fs.write_text_file)

    async def initialize(self, request: Any, params: Any) -> dict[str, Any]:
        """The protocol version and what each side offers. mol speaks one version, the
        SDK's: it answers with it whatever the editor asked for (an editor that does not
        speak it disconnects, as the protocol says)."""
        self.client = request.client_capabilities
        return {
            "protocolVersion": sdk.PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": False}},
            "authMethods": [],
            "agentInfo": {"name": "mol", "title": f"mol: {self.artifact.name}",
                          "version": __version__}}

    async def new_session(self, request: Any, params: Any) -> dict[str, Any]:
        """A new conversation; its commands follow the answer."""
        from mol.runtime import Conversation

        session = await self._open(Conversation().id, request.cwd, params, load=False)
        self.wire.after_result(session.id, [{"jsonrpc": "2.0",
                                             "method": sdk.CLIENT_METHODS["session_update"],
                                             "params": self._commands(session.id)}])
        return {"sessionId": session.id}

    async def load_session(self, request: Any, params: Any) -> dict[str, Any]:
        """A stored conversation, its history replayed as updates before the answer."""
        old = self.sessions.get(request.session_id)
        if old is not None:  # opened here already: opened anew, with this request's servers
            await old.close()
            self.sessions.pop(request.session_id, None)
        try:
            session = await self._open(request.session_id, request.cwd, params, load=True)
        except SessionNotFound as exc:
            raise SessionNotFound(f"sessionId: {exc}", field="sessionId") from exc
        logs = await self.store.turn_logs(session.id)
        await session.updates.replay(session.session.conversation.turns, logs)
        await self.peer.notify(sdk.CLIENT_METHODS["session_update"], self._commands(session.id))
        return {}

    async def _open(self, session_id: str, cwd: str, params: Any, load: bool) -> AgentSession:
        if not posixpath.isabs(cwd):
            raise ConversationError(f"cwd: {cwd!r} is not an absolute path", field="cwd")
        servers = client_servers(params.get("mcpServers"), posixpath.normpath(cwd),
                                 self.artifact.doc.mcp_servers)
        session = AgentSession(self, session_id, posixpath.normpath(cwd), servers)
        try:
            await self.group.start(session.keep, load)
        except BaseExceptionGroup as group:  # the lease's task group wraps what it ends with
            leaves = exception_leaves(group)
            raise next((e for e in leaves if isinstance(e, MolError)), leaves[0]) from group
        self.sessions[session.id] = session
        return session

    def _commands(self, session_id: str) -> dict[str, Any]:
        return {"sessionId": session_id, "update": {
            "sessionUpdate": "available_commands_update",
            "availableCommands": available_commands(self.artifact)}}

    def _session(self, session_id: str) -> AgentSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise ConversationError(f"sessionId: no session {session_id!r} is open here "
                                    "(session/new or session/load it first)", field="sessionId")
        return session

    async def prompt(self, request: Any, params: Any) -> dict[str, Any]:
        """One turn of a session."""
        text = prompt_text(request.prompt)
        return await self._session(request.session_id).prompt(text)

    def cancel(self, params: Any) -> None:
        """``session/cancel``: the session's prompt stops (a session unknown here: nothing)."""
        try:
            request = sdk.parsed(METHODS["session_cancel"], params)
        except ConversationError as exc:
            log.warning("session/cancel ignored: %s", exc)
            return
        session = self.sessions.get(request.session_id)
        if session is not None:
            session.cancel()

    async def close(self) -> None:
        """Close every session (their prompts cancelled, their leases given back)."""
        for session in list(self.sessions.values()):
            await session.close()
        self.sessions.clear()
