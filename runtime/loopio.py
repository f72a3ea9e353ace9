"""What the agent loop is given and gives back: ``LoopConfig`` (what a run works with),
``LoopHost`` (what it calls back: the turn running it) and ``LoopOutcome`` (how it ended).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mol.core import events as ev
from mol.core.tools import Approval, Later, Tool, ToolContext
from mol.hcp.schema import AdapterConfig
from mol.runtime.engine import Engine
from mol.runtime.hooks import HookSet, ToolCallInfo, ToolHooks


@dataclass
class LoopOutcome:
    """How a run of the loop ended."""

    answer: str = ""
    stopped: str = ""
    """Empty for a normal answer; ``max_steps``, ``token_budget`` or ``client_tools`` (the
    turn waits for the client: its tools' results, a person's approvals)."""
    client_calls: list[dict[str, Any]] = field(default_factory=list)
    asked: list[ToolCallInfo] = field(default_factory=list)
    """Calls of ``ask`` tools left open for a person's answer after the turn, as the person
    is asked about them."""
    tools_used: list[str] = field(default_factory=list)
    tokens: int = 0
    stop_hook_active: bool = False
    """A Stop hook already made this turn go on (Claude Code's ``stop_hook_active``)."""
    reasoning: str = ""
    """The engine's reasoning on the last reply (the answer, or the client tool calls)."""
    finish_reason: str = ""
    """The engine's ``finish_reason`` for the answer (``length``: its token limit cut it)."""
    stop_sequence: str = ""
    """The client's stop sequence that ended the answer, when the engine says which."""


@dataclass(frozen=True)
class LoopConfig:
    """What one run of the loop works with, fixed for the run (the session builds it)."""

    engine: Engine
    adapter: str
    config: AdapterConfig
    tools: dict[str, Tool]
    """Runtime tools visible to this adapter (policy already applied)."""
    all_tools: dict[str, Tool]
    """Every runtime tool, to tell a hidden tool from an unknown one."""
    client_tools: dict[str, dict[str, Any]]
    """Tools the client provides (OpenAI ``tools`` entries by name); their calls go back to it."""
    context: ToolContext
    tool_hooks: ToolHooks = field(default_factory=ToolHooks)
    """The plugins' hooks around each tool call."""
    hook_sets: list[HookSet] = field(default_factory=list)
    """The command hooks that run for this adapter (``mol.runtime.lifecycle.hook_sets``)."""
    stream: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    """The client's sampling parameters for this turn (``answer_params``)."""


class LoopHost(Protocol):
    """What the loop calls back: the turn running it (``mol.runtime.turn.Turn``)."""

    async def emit(self, event: ev.Event) -> None:
        """Pass an event of the turn to its observers."""

    async def commit(self, messages: list[dict[str, Any]], answer: str | None = None,
                     waiting: bool = False) -> None:
        """Append ``messages`` to the view at a consistent point; ``answer`` is the turn's
        final answer when these messages end it; ``waiting``: they leave calls open, and the
        turn waits for the client from here on."""

    async def approve(self, call: ToolCallInfo) -> Approval | Later | None:
        """A person's answer to an ``ask`` tool's call; None when nobody can answer;
        ``LATER`` when the person answers after the turn (the call stays open)."""

    async def answered(self, call: ToolCallInfo, answer: Approval,
                       remembered: bool = False) -> None:
        """Tell the turn of a person's answer to ``call`` (an ``always`` answer is
        remembered by the conversation); ``remembered``: the conversation's own answer."""

    async def review(self, answer: str) -> str | None:
        """Feedback that sends the answer back for revision (a user message; the answer and
        it are appended, never replacing anything), or None to accept it. The GenUI repair
        rounds (``mol.genui.review``) use it."""

    def new_id(self, adapter: str) -> str:
        """The mol id of a new tool call (``call_<adapter>_<hex>``)."""

    async def fit(self, view: list[dict[str, Any]], pending: list[dict[str, Any]],
                  tools: list[dict[str, Any]] | None, budget: int,
                  overflowed: bool = False) -> list[dict[str, Any]] | None:
        """Before a request of ``view + pending``: the engine's new view when the adapter's
        view had to be compacted to fit its window (``overflowed``: the engine said the
        request did not fit), else None (``mol.runtime.compaction.fit``)."""

    def measured(self, messages: list[dict[str, Any]], usage: Any) -> None:
        """The engine's count (``usage``) of the request of ``messages``."""
