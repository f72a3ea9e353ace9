"""Spans: the one seam between mol's code and a tracer.

Code that does something worth a span opens a scope where it does it: a turn
(``root``, in ``mol.runtime.session``), a tool call, an approval, a compaction, a sandbox
command, an MCP call (``span``)::

    with tracing.span("sandbox", op="run", command=command) as span:
        result = await self._shell.run(...)
        span.note(exit_code=result.exit_code)

The facts are mol's own words (``adapter``, ``call_id``, ``tool``, ``source``...); the
tracer alone (``mol.runtime.tracing``, the only code that imports OpenTelemetry) turns them
into span names and attributes of the OpenTelemetry GenAI conventions. A scope is the
child of the span current in this task and is current itself until it ends (an exception
leaving it ends it with an error); a task started inside it inherits it, as anyio copies
the context. The session's events reach the current span through ``observe`` (a session
observer while tracing is on), so a span also learns what happened during it (a route
decision, a tool's result, a model call's purpose).

When nothing is traced (no tracer, or tracing off), no span is current: ``span`` costs one
context variable lookup and returns a shared do-nothing scope, and this module imports
nothing but the standard library.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any, Protocol


class Span(Protocol):
    """A span in progress (the tracer's)."""

    def child(self, kind: str, facts: dict[str, Any]) -> Span:
        """A new span under this one (not made current: ``span`` does that)."""
        ...

    def note(self, **facts: Any) -> None:
        """Facts learned while the span runs (a command's exit code, a result)."""
        ...

    def event(self, event: Any) -> None:
        """A ``mol.core.events`` event that happened while this span was current."""
        ...

    def end(self, error: BaseException | None = None) -> None:
        """End the span; ``error`` is what ended it, if anything did."""
        ...

    @property
    def header(self) -> str:
        """This span's context as a W3C ``traceparent`` value (for a ``traceresponse``, or
        to continue the trace elsewhere)."""
        ...


class Tracer(Protocol):
    """What starts spans that have no mol parent in this task."""

    def start(self, kind: str, facts: dict[str, Any], parent: str | None = None) -> Span:
        """A new span: a root, or the child of the remote span ``parent`` names (a W3C
        ``traceparent`` header: a client's, or an eval run's sent to another machine)."""
        ...


_current: ContextVar[Span | None] = ContextVar("mol_span", default=None)
"""The span in progress in this task, when something is traced."""


class _NoSpan:
    """The span of a scope nothing traces: every call does nothing."""

    def child(self, kind: str, facts: dict[str, Any]) -> _NoSpan:
        return self

    def note(self, **facts: Any) -> None:
        pass

    def event(self, event: Any) -> None:
        pass

    def end(self, error: BaseException | None = None) -> None:
        pass

    header = ""


NO_SPAN = _NoSpan()
"""What ``with span(...) as s`` gives when nothing is traced."""


class _Off:
    """The scope nothing traces (one shared instance: it keeps no state)."""

    def __enter__(self) -> Any:
        return NO_SPAN

    def __exit__(self, *exc: object) -> bool:
        return False


_OFF = _Off()


class _Scope:
    """``span`` current from enter to exit, then ended (with the exception, if one left)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: Token[Span | None] | None = None

    def __enter__(self) -> Span:
        self._token = _current.set(self._span)
        return self._span

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> bool:
        if self._token is not None:
            _current.reset(self._token)
        self._span.end(error)
        return False


def span(kind: str, **facts: Any) -> _Scope | _Off:
    """A scope for a ``kind`` span under the current one; does nothing when none is."""
    parent = _current.get()
    if parent is None:
        return _OFF
    return _Scope(parent.child(kind, facts))


def root(tracer: Tracer | None, kind: str, *, parent: str | None = None,
         **facts: Any) -> _Scope | _Off:
    """A scope for a ``kind`` span that may begin a trace: under the current span when
    there is one, else started by ``tracer`` (under the remote ``parent`` when given);
    does nothing without either."""
    if parent is not None and tracer is not None:
        return _Scope(tracer.start(kind, facts, parent))
    current = _current.get()
    if current is not None:
        return _Scope(current.child(kind, facts))
    if tracer is None:
        return _OFF
    return _Scope(tracer.start(kind, facts))


def current() -> Span | None:
    """The span in progress in this task, if any (to carry it into another task)."""
    return _current.get()


class within:
    """Make ``span`` (from ``current()`` in another task) current for a block, without
    ending it; None leaves things as they are."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span | None) -> None:
        self._span = span
        self._token: Token[Span | None] | None = None

    def __enter__(self) -> None:
        if self._span is not None:
            self._token = _current.set(self._span)

    def __exit__(self, *exc: object) -> bool:
        if self._token is not None:
            _current.reset(self._token)
        return False


def observe(event: Any) -> None:
    """A session observer: hands ``event`` to the span current where it was emitted."""
    current = _current.get()
    if current is not None:
        current.event(event)
