"""The OpenTelemetry boundary: the only module that imports OpenTelemetry (the ``otel``
extra): its API, SDK, OTLP exporters and the conventions' names.

The span and attribute names the shapes write (``spans``, ``outer``, ``engine``) are defined
here, from the pinned ``opentelemetry-semantic-conventions`` release: nothing is typed by
hand but what the package defines in prose only (the values of ``gen_ai.tool.type``) and
mol's own ``mol.*`` names. The GenAI names live in the package's incubating modules (0.66b2
marks them as moved to the GenAI conventions' own repository; the names are unchanged
there).

``OtelTracer`` owns one ``TracerProvider`` (not the process's global one: two runtimes of
one process may export to different receivers, and mol sets nothing global) with a batch
processor and the OTLP exporter of the settings' protocol; its spans are ``OtelSpan``s,
which implement ``mol.core.tracing.Span`` and are written by the kinds' shapes
(``spans``, ``outer``: handed to it by ``open_tracer``, as the ``chat`` spans' engine
wrapper is, so this module imports none of them). W3C Trace Context is the SDK's propagator's: it reads a client's
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
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import mcp_attributes as mcp
from opentelemetry.semconv._incubating.attributes import session_attributes as session
from opentelemetry.semconv.attributes import (
    error_attributes,
    http_attributes,
    network_attributes,
    server_attributes,
    url_attributes,
)
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from mol.core import __version__
from mol.core import events as ev
from mol.runtime.tracing.settings import Settings

# -- the conventions' names ------------------------------------------------------------------

Operation = gen_ai.GenAiOperationNameValues

OPERATION = gen_ai.GEN_AI_OPERATION_NAME
INVOKE_AGENT = Operation.INVOKE_AGENT.value
CHAT = Operation.CHAT.value
EXECUTE_TOOL = Operation.EXECUTE_TOOL.value

AGENT_NAME = gen_ai.GEN_AI_AGENT_NAME
AGENT_VERSION = gen_ai.GEN_AI_AGENT_VERSION
CONVERSATION_ID = gen_ai.GEN_AI_CONVERSATION_ID
PROVIDER_NAME = gen_ai.GEN_AI_PROVIDER_NAME
REQUEST_MODEL = gen_ai.GEN_AI_REQUEST_MODEL
REQUEST_MAX_TOKENS = gen_ai.GEN_AI_REQUEST_MAX_TOKENS
REQUEST_TEMPERATURE = gen_ai.GEN_AI_REQUEST_TEMPERATURE
REQUEST_TOP_P = gen_ai.GEN_AI_REQUEST_TOP_P
REQUEST_STOP_SEQUENCES = gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES
REQUEST_STREAM = gen_ai.GEN_AI_REQUEST_STREAM
RESPONSE_FINISH_REASONS = gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
RESPONSE_MODEL = gen_ai.GEN_AI_RESPONSE_MODEL
INPUT_TOKENS = gen_ai.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS = gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
CACHE_READ_TOKENS = gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
INPUT_MESSAGES = gen_ai.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES = gen_ai.GEN_AI_OUTPUT_MESSAGES
TOOL_DEFINITIONS = gen_ai.GEN_AI_TOOL_DEFINITIONS
TOOL_NAME = gen_ai.GEN_AI_TOOL_NAME
TOOL_CALL_ID = gen_ai.GEN_AI_TOOL_CALL_ID
TOOL_TYPE = gen_ai.GEN_AI_TOOL_TYPE
TOOL_DESCRIPTION = gen_ai.GEN_AI_TOOL_DESCRIPTION
TOOL_CALL_ARGUMENTS = gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_CALL_RESULT = gen_ai.GEN_AI_TOOL_CALL_RESULT

EXTENSION = "extension"
"""``gen_ai.tool.type`` of a tool run on the agent's side (the conventions name the values
in prose only: ``function`` runs on the client's side, ``extension`` on the agent's)."""

MCP_METHOD = mcp.MCP_METHOD_NAME
MCP_TOOLS_CALL = mcp.McpMethodNameValues.TOOLS_CALL.value
MCP_PROTOCOL_VERSION = mcp.MCP_PROTOCOL_VERSION
SESSION_ID = session.SESSION_ID

ERROR_TYPE = error_attributes.ERROR_TYPE
HTTP_METHOD = http_attributes.HTTP_REQUEST_METHOD
HTTP_ROUTE = http_attributes.HTTP_ROUTE
HTTP_STATUS = http_attributes.HTTP_RESPONSE_STATUS_CODE
URL_PATH = url_attributes.URL_PATH
SERVER_ADDRESS = server_attributes.SERVER_ADDRESS
SERVER_PORT = server_attributes.SERVER_PORT
NETWORK_TRANSPORT = network_attributes.NETWORK_TRANSPORT
PIPE = network_attributes.NetworkTransportValues.PIPE.value
TCP = network_attributes.NetworkTransportValues.TCP.value

# -- the tracer ------------------------------------------------------------------------------

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

    def __init__(self, settings: Settings, shapes: dict[str, Any], wrap: type,
                 span_exporter: SpanExporter | None = None) -> None:
        """``shapes``: each kind of span's ``Shape`` (``outer.ALL_SHAPES``); ``wrap``: the
        engine wrapper of the ``chat`` spans (``engine.TracedEngine``)."""
        self.settings = settings
        self.shapes = shapes
        self.wrap = wrap
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
        shape = self.shapes[kind]
        span = self.tracer.start_span(shape.name(facts), context=context,
                                      kind=_KINDS[shape.span_kind])
        made = OtelSpan(self, span, shape, facts)
        shape.opened(made, facts)
        return made

    def engine(self, inner: Any, artifact: Any) -> Any:
        """``inner`` with a ``chat`` span around each request (``TracedEngine``)."""
        return inner if isinstance(inner, self.wrap) else self.wrap(inner, artifact)

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

    def __init__(self, tracer: OtelTracer, span: Any, shape: Any,
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
        self.span.set_attribute(ERROR_TYPE, error_type)
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
        self.span.set_attribute(ERROR_TYPE, "cancelled" if cancelled
                                else type(error).__qualname__)
        self.span.set_status(Status(StatusCode.ERROR))
