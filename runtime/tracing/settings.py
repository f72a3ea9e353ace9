"""Whether a runtime traces, and where to: the HCP's ``[telemetry]`` under the standard
``OTEL_*`` environment variables, read without importing OpenTelemetry (so that a runtime
that does not trace never imports it).

- ``OTEL_SDK_DISABLED=true`` turns tracing off, whatever else says;
- ``OTEL_TRACES_EXPORTER`` (a comma-separated list, as the SDKs read it) turns it on when
  it names ``otlp`` and off when it does not; unset, ``[telemetry] traces`` decides;
- ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``,
  ``..._TRACES_PROTOCOL`` / ``..._PROTOCOL`` and ``OTEL_SERVICE_NAME`` override
  ``endpoint``, ``protocol`` and ``service_name``; the exporter reads the endpoint
  variables itself (and ``OTEL_EXPORTER_OTLP_HEADERS`` for a receiver's key, which the
  HCP never holds), the SDK its ``OTEL_BSP_*`` batching and ``OTEL_TRACES_SAMPLER``;
- ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (the GenAI conventions' switch:
  ``true``, ``SPAN_ONLY`` or ``SPAN_AND_EVENT`` capture; ``false``, ``NO_CONTENT`` or
  ``EVENT_ONLY`` do not, since mol writes no log events) overrides ``capture_content``.

The variable names are the SDK's (``opentelemetry.environment_variables``,
``opentelemetry.sdk.environment_variables``: tests/runtime/tracing checks they agree) and,
for content capture, ``opentelemetry-util-genai``'s, which mol does not install.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from mol.core.errors import UsageError

log = logging.getLogger("mol.tracing")

SDK_DISABLED = "OTEL_SDK_DISABLED"
TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
SERVICE_NAME = "OTEL_SERVICE_NAME"
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

PROTOCOLS = ("http/protobuf", "grpc")
"""The OTLP transports mol exports over."""
_CAPTURE = {"true": True, "1": True, "span_only": True, "span_and_event": True,
            "false": False, "0": False, "no_content": False, "event_only": False}


@dataclass(frozen=True)
class Settings:
    """How a runtime traces."""

    protocol: str = "http/protobuf"
    endpoint: str | None = None
    """The endpoint to pass the exporter (the HCP's, made a full URL); None when the
    environment names one (the exporter reads it) or nobody does (its default)."""
    service_name: str = "mol"
    capture_content: bool = False
    source: str = ""
    """What turned tracing on, for messages (``OTEL_TRACES_EXPORTER=otlp``,
    ``[telemetry] traces = "otlp"``)."""


def settings(config: object | None, environ: Mapping[str, str] | None = None
             ) -> Settings | None:
    """How to trace with the ``[telemetry]`` table ``config`` (a ``TelemetryConfig``, or None)
    and the environment; None when tracing is off. A protocol mol does not export over is
    a ``UsageError`` naming where it was set."""
    env = os.environ if environ is None else environ
    if env.get(SDK_DISABLED, "").strip().lower() == "true":
        return None
    exporters = env.get(TRACES_EXPORTER)
    if exporters is not None and exporters.strip():
        names = [name.strip().lower() for name in exporters.split(",") if name.strip()]
        ignored = [name for name in names if name not in ("otlp", "none")]
        if ignored:
            log.warning("%s=%s: mol exports traces over OTLP only; ignoring %s",
                        TRACES_EXPORTER, exporters, ", ".join(ignored))
        if "otlp" not in names:
            return None
        source = f"{TRACES_EXPORTER}={exporters}"
    elif getattr(config, "traces", "none") == "otlp":
        source = '[telemetry] traces = "otlp"'
    else:
        return None
    protocol, where = _protocol(config, env)
    if protocol not in PROTOCOLS:
        raise UsageError(f"{where} = {protocol!r}: mol exports traces over "
                         f"{' or '.join(PROTOCOLS)}")
    return Settings(protocol=protocol, endpoint=_endpoint(config, env, protocol),
                    service_name=env.get(SERVICE_NAME) or getattr(config, "service_name", "mol"),
                    capture_content=capture_content(config, env), source=source)


def capture_content(config: object | None, environ: Mapping[str, str]) -> bool:
    """Whether spans carry message text: the GenAI conventions' switch, else the HCP's."""
    value = environ.get(CAPTURE_CONTENT, "").strip()
    if not value:
        return bool(getattr(config, "capture_content", False))
    if value.lower() not in _CAPTURE:
        log.warning("%s=%s is not one of %s; capturing no content", CAPTURE_CONTENT, value,
                    ", ".join(sorted(_CAPTURE)))
        return False
    return _CAPTURE[value.lower()]


def _protocol(config: object | None, env: Mapping[str, str]) -> tuple[str, str]:
    for name in (TRACES_PROTOCOL, PROTOCOL):
        if env.get(name, "").strip():
            return env[name].strip(), name
    return getattr(config, "protocol", "http/protobuf"), "[telemetry] protocol"


def _endpoint(config: object | None, env: Mapping[str, str], protocol: str) -> str | None:
    if env.get(TRACES_ENDPOINT, "").strip() or env.get(ENDPOINT, "").strip():
        return None  # the exporter reads them, with the signal path rules of the spec
    base = getattr(config, "endpoint", None)
    if base is None:
        return None
    return base if protocol == "grpc" else base.rstrip("/") + "/v1/traces"
