"""Which conversation a request continues: a stored one in place, a fork of it, or a new
one (seeded with the history the client sent), held for the turn. A client-chosen id
(``X-Conversation-Id``) names the conversation itself: it is continued in place, or made
under that id.

A request names the point it continues by a key (a response id, or the fingerprint of
the transcript it resends). The point's conversation is held (``Leases``), then read
again: once the lock is ours, a turn that named the point before finishing has written
its final mark. A point followed only by interrupted turns continues in place; an older
one forks (``mol.server.turns.marks``). Tool results must answer exactly the calls the
waiting turn left open (``mol.server.turns.seeding``), and the approvals it waits for take
only their answers (``mol.server.turns.approvals``). A request that ``follows`` a job
continues where that job's turn ended, in memory: a response its client's connection kept
without storing it. A request that ``expire``s a conversation's approvals continues that
conversation in place.
"""

from __future__ import annotations

from typing import Any

from mol.core.errors import SessionNotFound
from mol.runtime import Conversation, Runtime, SessionStore, TurnLog
from mol.server.turns.approvals import Approvals
from mol.server.turns.elicitation import Elicitations
from mol.server.turns.jobs import Job, TurnRequest
from mol.server.turns.leases import Leases
from mol.server.turns.marks import continues_in_place, fork
from mol.server.turns.seeding import check_results, seed, waiting_calls


class Continuing:
    """Finds and holds the conversation each request continues."""

    def __init__(self, runtime: Runtime, store: SessionStore, leases: Leases,
                 elicitations: Elicitations, approvals: Approvals) -> None:
        self.runtime, self.store = runtime, store
        self.leases, self.elicitations, self.approvals = leases, elicitations, approvals

    async def conversation(self, request: TurnRequest, held: list[str]) -> Conversation:
        """The conversation ``request`` continues (in place or forked), or a new one; the
        ids it holds are added to ``held`` (the caller gives them back)."""
        if request.follows is not None:
            return await self._follow(request, request.follows, held)
        if request.expire is not None:
            await self._acquire(request.expire, held)
            return await self.store.load(request.expire)
        if request.conversation is not None:
            return await self._named(request, request.conversation, held)
        if request.key is not None:
            found = await self.store.get_mark(request.key)
            if found is not None:
                await self._acquire(found[0], held)
                found = await self.store.get_mark(request.key)  # final once the lock is ours
            if found is not None:
                return await self._continue(found[0], found[1], request, held)
            if request.key_required:
                raise SessionNotFound(f"no stored response {request.key!r} to continue "
                                      "(unknown, or created with store: false)",
                                      field="previous_response_id")
        conversation = Conversation()
        await self._acquire(conversation.id, held)
        return await self._fresh(conversation, request)

    async def _named(self, request: TurnRequest, session_id: str,
                     held: list[str]) -> Conversation:
        """The conversation a client-chosen id names, in place; a new one under that id (the
        history the request sends seeding it) when the store has none."""
        await self._acquire(session_id, held)
        try:
            conversation = await self.store.load(session_id)
        except SessionNotFound:
            return await self._fresh(Conversation(id=session_id), request)
        self._check(conversation, request)
        return conversation

    async def _fresh(self, conversation: Conversation, request: TurnRequest) -> Conversation:
        """A new conversation (already held), seeded with the request's history."""
        if request.seed:
            await self._seed(conversation, request)
            self.approvals.check(conversation, request)  # mol asked nothing in it
            if request.persist:
                await self.store.save(conversation, None, TurnLog(self.runtime.artifact.digest))
        elif request.tool_results is not None:
            check_results([], request.tool_results, request.result_fields, request.where)
        return conversation

    async def _continue(self, session_id: str, mark: dict[str, Any], request: TurnRequest,
                        held: list[str]) -> Conversation:
        conversation = await self.store.load(session_id)
        if continues_in_place(conversation, mark):
            self._check(conversation, request)
            return conversation
        branch = fork(conversation, mark)
        self._check(branch, request)
        await self._acquire(branch.id, held)
        if request.persist:
            await self.store.save(branch, None, TurnLog(self.runtime.artifact.digest),
                                  parent=session_id)
        return branch

    async def _follow(self, request: TurnRequest, job: Job, held: list[str]) -> Conversation:
        """Where ``job``'s turn ended, in memory: that conversation in place (the connection
        that kept it owns it), or a fork when it moved on since or this turn is stored (the
        conversation it forks was not)."""
        base = job.flight.conversation
        if base is not None:
            await self._acquire(base.id, held)  # the earlier turn has ended once it is ours
        if base is None or job.mark is None:
            raise SessionNotFound("the response to continue did not complete",
                                  field="previous_response_id")
        if not request.persist and continues_in_place(base, job.mark):
            self._check(base, request)
            return base
        branch = fork(base, job.mark)
        self._check(branch, request)
        await self._acquire(branch.id, held)
        if request.persist:
            await self.store.save(branch, None, TurnLog(self.runtime.artifact.digest))
        return branch

    async def _seed(self, conversation: Conversation, request: TurnRequest) -> None:
        """Earlier turns the client sent become plain messages after each adapter's own
        system prompt (``mol.server.turns.seeding``)."""
        runtime, doc = self.runtime, self.runtime.artifact.doc
        fields = request.seed_fields or [f"{request.where}[{i}].tool_call_id"
                                         for i in range(len(request.seed))]

        async def prompt(adapter: str) -> str:
            return runtime.system_prompt(adapter, await runtime.tools_for(adapter))

        await seed(conversation, request.seed, fields, request.tool_results,
                   request.result_fields, request.where, doc.adapter_names, doc.adapters,
                   doc.route_fallback, prompt)

    async def _acquire(self, session_id: str, held: list[str]) -> None:
        if self.elicitations.pending:
            self.elicitations.check_free(session_id)
        for other in list(held):
            await self.leases.give(other)
            held.remove(other)
        await self.leases.take(session_id)
        held.append(session_id)

    def _check(self, conversation: Conversation, request: TurnRequest) -> None:
        """Whether ``request`` may go on with ``conversation``: the approvals it waits for
        (``Approvals.check``), then the tool results against its open calls."""
        self.approvals.check(conversation, request)
        if request.tool_results is not None:
            check_results(waiting_calls(conversation), request.tool_results,
                          request.result_fields, request.where)
