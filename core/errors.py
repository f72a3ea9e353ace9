"""The one exception hierarchy of mol.

Every error mol raises on purpose is a ``MolError``. Third-party exceptions
(litellm, mcp, docker, sqlite) are translated at exactly one boundary each and
keep their cause (``raise ... from exc``)::

    MolError                      base; ``exit_code`` is what the CLI exits with
    ├── UsageError                bad command-line input (exit 2)
    ├── HCPError                  an invalid HCP artifact or patch (exit 2); ``.issues``
    ├── EngineError               the model engine failed (runtime/engine.py)
    │   ├── EngineConnectionError   nothing answered at ``api_base``
    │   ├── EngineTimeout           no answer within the deadline
    │   ├── EngineRateLimited       429 after the retries
    │   ├── EngineResponseError     another error status from the engine
    │   │   ├── EngineContextLength     the request exceeds the model's context window
    │   │   └── EngineAdapterUnavailable  the engine has not loaded (or does not know) the LoRA
    │   ├── EngineProtocolError     a reply mol cannot read
    │   └── LocalEngineError        the embedded local engine is missing or did not start
    ├── ToolError                 a tool could not be set up or found (not a tool *failure*:
    │                             those become text the model reads)
    ├── PluginError               a plugin failed to load or register
    ├── HookError                 a command hook is misconfigured
    ├── MCPError                  an MCP server misbehaved (runtime/mcp.py)
    │   ├── MCPStartupError         a server did not start or initialize
    │   ├── MCPTimeout              a call exceeded ``tool_timeout_sec``
    │   ├── MCPServerDied           the server process exited
    │   └── MCPSignInError          a sign-in the server's OAuth asked for could not be had
    ├── SandboxError              a sandbox failed (sandboxes/)
    │   ├── DockerUnavailable       no Docker engine answers
    │   ├── SandboxTimeout          a Docker operation exceeded its deadline
    │   ├── ShellDied               the persistent shell exited
    │   └── PathEscape              a file path points outside the workspace
    ├── ConversationError         a conversation cannot continue as asked (exit 2); ``.field``
    │   ├── InvalidTranscript       a view would break the tool-call contract (a call
    │   │                           without its results, a result without its call)
    │   ├── AnswerEnded             an answer to a request for input that ended already
    │   │   └── ApprovalEnded           ... to a request for a person's approval
    │   └── ContextTooLong          a view that does not fit its adapter's context window
    ├── TurnError                 a turn of the server did not run to its end
    │   ├── TurnCancelled           cancelled by its client (``POST .../cancel``)
    │   ├── TurnDeadline            over the server's deadline
    │   └── Overloaded              no turn slot and no place in the queue; ``.retry_after``
    ├── SkillError                a skill folder is invalid (mol.skills)
    ├── GenUIError                generated UI cannot be checked or previewed (mol.genui)
    │   └── GenUISetupError         the npm toolchain is missing: run ``mol genui setup``
    ├── SessionError              the session store failed
    │   ├── SessionNotFound         no session or response with that id; ``.field``
    │   ├── SessionBusy             another replica holds the session's lease (a turn in flight)
    │   └── SessionConflict         the session changed elsewhere since it was loaded
    ├── ServerError               the HTTP server cannot start as configured
    ├── ClientError               an editor driving ``mol acp`` answered one of mol's
    │                             requests with an error, or went away (acpagent/sdk.py)
    └── EvalError                 an eval run cannot proceed (mol.eval): its results store
        ├── TaskError               a task folder or suite is invalid (exit 2)
        └── ClusterError            the Ray cluster cannot be reached or failed
            │                       (eval/cluster/ray_backend.py)
            └── NodeLost              the node (or worker process) running an episode died

Three kinds of failure are kept apart: a tool failure becomes text the model
reads (never an exception here); a protocol error passes through unchanged; a
developer or configuration error is one of these classes, naming the file,
key, plugin or argument at fault.
"""

from __future__ import annotations

from dataclasses import dataclass


def exception_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups, in order; ``[exc]`` itself
    when it is not a group. Task groups wrap what their tasks raise; callers report leaves."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for inner in exc.exceptions for leaf in exception_leaves(inner)]


@dataclass(frozen=True)
class Issue:
    """A single problem of an HCP artifact: where it is (file, line, key path) and what is
    wrong. ``mol.hcp.issues`` re-exports it."""

    message: str
    file: str | None = None
    line: int | None = None
    path: str = ""
    """Key path in the document, e.g. ``adapters.L2.tools.allow[3]``."""
    hint: str | None = None
    """A suggestion, e.g. the closest valid key for a typo."""

    def __str__(self) -> str:
        where = self.file or "<artifact>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: "
        if self.path:
            text += f"{self.path}: "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class MolError(Exception):
    """Base class of every error mol raises on purpose."""

    exit_code = 1
    """Exit status of the ``mol`` CLI when this error ends a command."""


class UsageError(MolError):
    """Bad command-line input: a missing file, a malformed argument."""

    exit_code = 2


class HCPError(MolError):
    """An HCP artifact (or a patch to one) is invalid.

    ``issues`` lists every problem found, so all of them are reported at once.
    """

    exit_code = 2

    def __init__(self, issues: list[Issue] | str) -> None:
        if isinstance(issues, str):
            issues = [Issue(message=issues)]
        self.issues = list(issues)
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.issues) == 1:
            return str(self.issues[0])
        lines = [f"{len(self.issues)} problems:"]
        lines += [f"  {issue}" for issue in self.issues]
        return "\n".join(lines)


class EngineError(MolError):
    """The model engine could not answer a request."""


class EngineConnectionError(EngineError):
    """Nothing answered at the engine's ``api_base``."""


class EngineTimeout(EngineError):
    """The engine did not answer within the request deadline."""


class EngineRateLimited(EngineError):
    """The engine kept answering 429 after the bounded retries."""


class EngineResponseError(EngineError):
    """The engine answered with an error status other than 429."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class EngineContextLength(EngineResponseError):
    """The request (messages plus the reply's budget) exceeds the model's context window."""


class EngineAdapterUnavailable(EngineResponseError):
    """The engine answered that the adapter's LoRA is not loaded, or that no such model
    exists: the adapter cannot answer on this engine right now."""


class EngineProtocolError(EngineError):
    """The engine's reply does not follow the Chat Completions protocol."""


class LocalEngineError(EngineError):
    """The embedded local engine (``mol engine local``) is not installed or did not start."""


class ToolError(MolError):
    """A tool could not be defined, registered or found."""


class PluginError(MolError):
    """A plugin failed to import or register (fatal only in strict mode)."""


class HookError(MolError):
    """A command hook is misconfigured or cannot be started."""


class MCPError(MolError):
    """An MCP server misbehaved."""


class MCPStartupError(MCPError):
    """An MCP server did not start or answer ``initialize`` in time."""


class MCPTimeout(MCPError):
    """An MCP call exceeded its timeout."""


class MCPServerDied(MCPError):
    """An MCP server process exited while mol needed it."""


class MCPSignInError(MCPError):
    """A server's OAuth needed a person to sign in (a first sign-in, or a wider scope) and
    none could: nobody to ask, or the person declined."""


class SandboxError(MolError):
    """A sandbox operation failed."""


class DockerUnavailable(SandboxError):
    """No Docker engine answers on this machine."""


class SandboxTimeout(SandboxError):
    """A Docker operation did not finish within its deadline."""


class ShellDied(SandboxError):
    """The persistent shell inside a sandbox exited."""


class PathEscape(SandboxError):
    """A file path points outside the sandbox workspace."""

    exit_code = 2


class ConversationError(MolError):
    """A conversation cannot continue as asked, e.g. tool results for calls mol never issued."""

    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        """The request field at fault (``input[4].call_id``), when a request asked."""


class InvalidTranscript(ConversationError):
    """Messages that break the Chat Completions tool-call contract: an assistant tool-call
    message not followed by exactly its results, or a tool message answering no open call.
    No view is ever built that way (``mol.runtime.views.check_steps``)."""


class ContextTooLong(ConversationError):
    """A request of an adapter would not fit its context window, and it may not (or cannot)
    be compacted: ``[compaction] mode = "error"``, a hook blocked the compaction, or what must
    stay verbatim alone is too long."""

    def __init__(self, message: str, *, adapter: str, window: int, size: int,
                 field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.adapter, self.window, self.size = adapter, window, size


class AnswerEnded(ConversationError):
    """An answer to a request for input (an MCP server's elicitation) that ended already:
    answered before, or given up on after its timeout."""


class ApprovalEnded(AnswerEnded):
    """An answer to a request for a person's approval (an ``ask`` tool's call) that ended
    already: answered before, or denied after its timeout."""


class SkillError(MolError):
    """A skill folder or its ``SKILL.md`` is invalid."""

    exit_code = 2


class GenUIError(MolError):
    """Generated UI cannot be checked or previewed: the checker failed to run (a problem *in*
    the UI is a report the model reads, never this)."""


class GenUISetupError(GenUIError):
    """The GenUI npm toolchain (esbuild, TypeScript, the A2UI renderer) is not installed or is
    out of date; ``mol genui setup`` installs it."""


class SessionError(MolError):
    """The session store failed."""


class SessionNotFound(SessionError):
    """No stored session or response has the given id."""

    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        """The request field naming the id (``previous_response_id``), when a request did."""


class SessionBusy(SessionError):
    """A turn of the session is in flight on another replica (it holds the lease)."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = max(retry_after, 0.0)
        """Seconds until the holder's lease expires at the latest."""


class SessionConflict(SessionError):
    """The session's stored revision moved since it was loaded: another writer won."""


class TurnError(MolError):
    """A turn of the server did not run to its end."""


class TurnCancelled(TurnError):
    """The turn was cancelled by its client before it completed."""


class TurnDeadline(TurnError):
    """The turn took longer than the server's deadline and was cancelled."""


class Overloaded(TurnError):
    """Every turn slot is taken and the queue in front of them is full (or the wait for a
    slot ran out): the turn was refused before it started."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = max(retry_after, 0.0)
        """Seconds after which a retry may find room."""


class ServerError(MolError):
    """The HTTP server cannot start with the given configuration."""

    exit_code = 2


class ClientError(MolError):
    """An Agent Client Protocol client (the editor ``mol acp`` serves) answered a request of
    mol's (a file, a terminal, a permission) with an error, or is gone."""


class EvalError(MolError):
    """An eval run cannot proceed: its results store or a trajectory is unreadable."""


class TaskError(EvalError):
    """A task folder (``task.toml``, ``instruction.md``, ``tests/``) or a suite is invalid."""

    exit_code = 2


class ClusterError(EvalError):
    """The Ray cluster of ``mol eval run --ray`` cannot be reached, has no sandbox slots, or
    failed an episode's task for a reason of its own."""


class NodeLost(ClusterError):
    """The node (or the worker process) running an episode died before it answered."""
