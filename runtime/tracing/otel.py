"""The OpenTelemetry boundary: the only module that imports the OpenTelemetry API, SDK and
OTLP exporters (the ``otel`` extra; ``semconv`` imports the conventions' names).

``OtelTracer`` owns one ``TracerProvider`` (not the process's global one: two runtimes of
one process may export to different receivers, and mol sets nothing global) with a batch
processor and the OTLP exporter of the settings' protocol; its spans are ``OtelSpan``s,
which implement ``mol.core.tracing.Span`` and are written by the kinds' shapes
(``spans``, ``outer``). W3C Trace Context is the SDK's propagator's: it reads a client's
``traceparent`` and writes the ``traceresponse`` (the same format, naming mol's span).
Exporting happens in the processor's thread; a receiver that is down costs dropped spans
and a log line from the exporter, never a failed turn.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from mol.core import __version__
from mol.core import events as ev
from mol.runtime.tracing import semconv as sc
from mol.runtime.tracing.outer import ALL_SHAPES
from mol.runtime.tracing.settings import Settings
from mol.runtime.tracing.spans import Shape

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
_PROPAGATOR = TraceContextTextMapPropagator()
TRACEPARENT = "traceparent"
"""The header W3C Trace Context reads (the propagator's one field)."""


def exporter(settings: Settings) -> SpanExporter:
    """The OTLP exporter for ``settings`` (gRPC's is imported only when asked for)."""
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=settings.endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=settings.endpoint)


class OtelTracer:
    """Starts mol's spans on a provider of its own; ``shutdown`` exports what is left."""

    def __init__(self, settings: Settings, span_exporter: SpanExporter | None = None) -> None:
        self.settings = settings
        self.capture = settings.capture_content
        """Whether spans carry message text."""
        resource = Resource.create({SERVICE_NAME: settings.service_name,
                                    SERVICE_VERSION: __version__})
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(span_exporter
                                                            or exporter(settings)))
        self.tracer = self.provider.get_tracer("mol", __version__)

    def start(self, kind: str, facts: dict[str, Any], parent: str | None = None) -> OtelSpan:
        """A root span, or the child of the remote span a W3C ``traceparent`` names (an
        unreadable one starts a root, as the propagator reads it)."""
        context = _PROPAGATOR.extract({TRACEPARENT: parent}) if parent else None
        return self.open(kind, facts, context)

    def open(self, kind: str, facts: dict[str, Any], context: Any) -> OtelSpan:
        shape = ALL_SHAPES[kind]
        span = self.tracer.start_span(shape.name(facts), context=context,
                                      kind=_KINDS[shape.span_kind])
        made = OtelSpan(self, span, shape, facts)
        shape.opened(made, facts)
        return made

    def engine(self, inner: Any, artifact: Any) -> Any:
        """``inner`` with a ``chat`` span around each request (``TracedEngine``)."""
        from mol.runtime.tracing.engine import TracedEngine

        return inner if isinstance(inner, TracedEngine) else TracedEngine(inner, artifact)

    def shutdown(self) -> None:
        """Export the spans still queued (blocking: run it in a worker thread)."""
        self.provider.shutdown()


class OtelSpan:
    """One of mol's spans (``mol.core.tracing.Span``), written by its kind's shape.

    A ``chat`` span is not ended by its engine call: it is *parked* on the span current at
    the call until the hop's ``model_call`` event says what the call was for (``route``,
    ``answer``, ``summary``, ``compaction``), then ended at the time the reply arrived; an
    engine error's ``error`` event (``where``) does the same for a failed call. A parked
    span nothing claims ends with the next parked one, or with its parent."""

    __slots__ = ("_parked", "capture", "facts", "shape", "span", "tracer")

    def __init__(self, tracer: OtelTracer, span: Any, shape: Shape,
                 facts: dict[str, Any]) -> None:
        self.tracer = tracer
        self.span = span
        self.shape = shape
        self.facts = facts
        self.capture = tracer.capture
        self._parked: tuple[OtelSpan, int] | None = None

    # -- mol.core.tracing.Span --------------------------------------------------------------

    def child(self, kind: str, facts: dict[str, Any]) -> OtelSpan:
        return self.tracer.open(kind, facts, trace.set_span_in_context(self.span))

    def note(self, **facts: Any) -> None:
        self.shape.note(self, {**self.facts, **facts})

    def event(self, event: Any) -> None:
        if self._parked is not None:
            if isinstance(event, ev.ModelCalled):
                self._claim(event.purpose)
            elif isinstance(event, ev.Failed):
                self._claim(event.where)
        self.shape.event(self, event)

    def end(self, error: BaseException | None = None) -> None:
        self._unpark()
        if error is not None:
            self._error(error)
        self.shape.ending(self, self.facts)
        self.span.end()

    @property
    def header(self) -> str:
        """This span's context as a W3C ``traceparent`` value."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier.get(TRACEPARENT, "")

    @property
    def trace_id(self) -> str:
        """The trace's id, as 32 hex digits."""
        return format(self.span.get_span_context().trace_id, "032x")

    # -- what the shapes write (spans.Sink) ---------------------------------------------------

    def set(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    def add_event(self, name: str, attributes: dict[str, Any]) -> None:
        self.span.add_event(name, attributes)

    def fail(self, error_type: str) -> None:
        """Mark the span failed with ``error.type`` (no message: it may be content)."""
        self.span.set_attribute(sc.ERROR_TYPE, error_type)
        self.span.set_status(Status(StatusCode.ERROR))

    # -- parked chat spans ------------------------------------------------------------------

    def park(self, chat: OtelSpan, error: BaseException | None = None) -> None:
        """Hold ``chat`` (its request answered now, or failed with ``error``) until its hop
        is known."""
        self._unpark()
        if error is not None:
            chat._error(error)
        self._parked = (chat, time.time_ns())

    def _claim(self, purpose: str) -> None:
        assert self._parked is not None
        chat, ended = self._parked
        self._parked = None
        chat.note(purpose=purpose)
        chat.span.end(end_time=ended)

    def _unpark(self) -> None:
        if self._parked is not None:
            chat, ended = self._parked
            self._parked = None
            chat.span.end(end_time=ended)

    def _error(self, error: BaseException) -> None:
        cancelled = not isinstance(error, Exception)
        self.span.set_attribute(sc.ERROR_TYPE, "cancelled" if cancelled
                                else type(error).__qualname__)
        self.span.set_status(Status(StatusCode.ERROR))
