"""Tracing: OpenTelemetry spans of what a runtime does, exported over OTLP.

``open_tracer(artifact)`` decides from the HCP's ``[telemetry]`` and the ``OTEL_*``
environment (``settings``) whether anything is traced; when not, it yields None and
nothing of OpenTelemetry is imported. When it is, it yields an ``OtelTracer`` (``otel``,
the one module importing OpenTelemetry: its SDK, exporters and the conventions' names)
and exports what is left when the block ends. The runtime's code
opens spans through ``mol.core.tracing`` only; what each kind of span carries is in
``spans`` and ``outer``, message text in ``content``, the ``chat`` spans in ``engine``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from mol.core.errors import UsageError
from mol.runtime.tracing.settings import Settings, settings

log = logging.getLogger("mol.tracing")

SHUTDOWN_SEC = 10.0
"""Most time spent exporting the last spans when a tracer closes (a receiver that does not
answer must not hold a command's exit)."""

__all__ = ["SHUTDOWN_SEC", "Settings", "open_tracer", "settings"]


@asynccontextmanager
async def open_tracer(artifact: Any, *, exporter: Any = None) -> AsyncIterator[Any]:
    """The tracer ``artifact``'s ``[telemetry]`` and the environment ask for, or None.
    ``exporter``: a ``SpanExporter`` to use instead of OTLP (tests). Tracing asked for
    without the ``otel`` extra is a ``UsageError`` saying how to install it."""
    chosen = settings(getattr(artifact.doc, "telemetry", None))
    if chosen is None:
        yield None
        return
    try:
        from mol.runtime.tracing import otel
        from mol.runtime.tracing.engine import TracedEngine
        from mol.runtime.tracing.outer import ALL_SHAPES

        tracer = otel.OtelTracer(chosen, ALL_SHAPES, TracedEngine, exporter)
    except ImportError as exc:
        raise UsageError(f"tracing is on ({chosen.source}) but OpenTelemetry is not "
                         f"installed ({exc.name} is missing): pip install 'mol-agent[otel]'"
                         ) from exc
    log.info("tracing to %s over %s (%s)", chosen.endpoint or "the OTLP endpoint of the "
             "environment", chosen.protocol, chosen.source)
    try:
        yield tracer
    finally:
        with anyio.move_on_after(SHUTDOWN_SEC, shield=True):
            await anyio.to_thread.run_sync(tracer.shutdown, abandon_on_cancel=True)
