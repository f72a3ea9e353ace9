"""Whether and where a runtime traces (the ``OTEL_*`` variables over ``[telemetry]``), and
what tracing off costs: nothing of OpenTelemetry imported, one module importing it when on."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry import environment_variables as api_env
from opentelemetry.sdk import environment_variables as sdk_env

from mol.core.errors import UsageError
from mol.hcp.schema import TelemetryConfig
from mol.runtime.tracing.settings import settings

chosen = importlib.import_module("mol.runtime.tracing.settings")

ROOT = Path(__file__).resolve().parents[3]


def test_the_variable_names_are_the_sdks():
    assert chosen.TRACES_EXPORTER == api_env.OTEL_TRACES_EXPORTER
    assert chosen.SDK_DISABLED == sdk_env.OTEL_SDK_DISABLED
    assert chosen.ENDPOINT == sdk_env.OTEL_EXPORTER_OTLP_ENDPOINT
    assert chosen.TRACES_ENDPOINT == sdk_env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    assert chosen.PROTOCOL == sdk_env.OTEL_EXPORTER_OTLP_PROTOCOL
    assert chosen.TRACES_PROTOCOL == sdk_env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    assert chosen.SERVICE_NAME == sdk_env.OTEL_SERVICE_NAME


def test_off_unless_the_environment_or_the_hcp_asks():
    table = TelemetryConfig()
    assert settings(table, {}) is None
    assert settings(None, {}) is None
    on = settings(table, {"OTEL_TRACES_EXPORTER": "otlp"})
    assert on is not None and on.protocol == "http/protobuf" and on.endpoint is None
    assert on.capture_content is False and on.service_name == "mol"
    hcp = TelemetryConfig(traces="otlp", endpoint="http://collector:4318/", service_name="agent")
    from_hcp = settings(hcp, {})
    assert from_hcp is not None and from_hcp.endpoint == "http://collector:4318/v1/traces"
    assert from_hcp.service_name == "agent"
    # The environment wins: it turns the HCP's tracing off, renames, picks the endpoint.
    assert settings(hcp, {"OTEL_TRACES_EXPORTER": "none"}) is None
    assert settings(hcp, {"OTEL_SDK_DISABLED": "true"}) is None
    moved = settings(hcp, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318",
                           "OTEL_SERVICE_NAME": "svc", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert moved is not None and moved.endpoint is None  # the exporter reads the variable
    assert (moved.service_name, moved.protocol) == ("svc", "grpc")
    grpc = settings(TelemetryConfig(traces="otlp", endpoint="http://c:4317", protocol="grpc"), {})
    assert grpc is not None and grpc.endpoint == "http://c:4317"


def test_content_capture_is_the_conventions_switch_over_the_hcps():
    env = {"OTEL_TRACES_EXPORTER": "otlp"}
    capturing = TelemetryConfig(capture_content=True)
    assert settings(capturing, env).capture_content is True
    for value, captured in (("true", True), ("SPAN_ONLY", True), ("span_and_event", True),
                            ("false", False), ("NO_CONTENT", False), ("EVENT_ONLY", False),
                            ("maybe", False)):
        switch = {**env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": value}
        assert settings(capturing, switch).capture_content is captured, value
        assert settings(TelemetryConfig(), switch).capture_content is captured, value


def test_a_protocol_mol_does_not_export_over_names_where_it_was_set():
    with pytest.raises(UsageError, match=r"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = 'http/json'"):
        settings(None, {"OTEL_TRACES_EXPORTER": "otlp",
                        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"})


def importers(package: str) -> set[str]:
    """The code's modules that import ``package`` (or a module of it), anywhere."""
    found = set()
    for folder in ("core", "hcp", "runtime", "server", "eval", "cli", "sandboxes", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom)
                         and not node.level else [])
                if any(name == package or name.startswith(package + ".") for name in names):
                    found.add(str(path.relative_to(ROOT)))
    return found


def test_one_module_imports_opentelemetry():
    assert importers("opentelemetry") == {"runtime/tracing/otel.py"}


TURN = """
import sys, anyio
from pathlib import Path
from mol.hcp.loader import load
from mol.runtime import open_runtime
from mol.runtime.testing import ScriptedEngine

SCRIPT = '[[L0]]\\nconstrained = true\\ntimes = -1\\nreply = "L0"\\n[[L0]]\\ntimes = -1\\nreply = "ok"\\n'

async def main():
    async with ScriptedEngine.serve(SCRIPT) as engine:
        async with open_runtime(load(Path(sys.argv[1])), engine_url=engine.base_url) as runtime:
            async with runtime.session() as session:
                print((await session.turn("hi")).answer)
    print(sorted({name.split(".")[0] for name in sys.modules} & {"opentelemetry"}))

anyio.run(main)
"""


def run_turn(tmp_path: Path, hcp: str, env: dict[str, str], blocker: str = "") -> \
        subprocess.CompletedProcess:
    path = tmp_path / "mol.toml"
    path.write_text('schema_version = 1\nname = "t"\n[router]\nprompt = "Route."\n'
                    '[engine]\nmax_retries = 0\n' + hcp)
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP":
               "True", **env}
    return subprocess.run([sys.executable, "-c", blocker + TURN, str(path)], env=environ,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_turn_with_tracing_off_imports_nothing_of_opentelemetry(tmp_path):
    done = run_turn(tmp_path, "", {})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["ok", "[]"]
    # With tracing on, the same turn imports it: the check above can fail.
    done = run_turn(tmp_path, '[telemetry]\ntraces = "otlp"\nendpoint = "http://127.0.0.1:9"\n',
                    {"OTEL_EXPORTER_OTLP_TIMEOUT": "1"})  # nobody listens there
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["ok", "['opentelemetry']"]


BLOCKER = textwrap.dedent("""
    import sys
    class Absent:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Absent())
""")


def test_tracing_asked_for_without_the_extra_says_how_to_install_it(tmp_path):
    done = run_turn(tmp_path, "", {"OTEL_TRACES_EXPORTER": "otlp"}, BLOCKER)
    assert done.returncode != 0
    assert ("tracing is on (OTEL_TRACES_EXPORTER=otlp) but OpenTelemetry is not installed "
            "(opentelemetry is missing): pip install 'mol-agent[otel]'") in done.stderr


def test_telemetry_is_deployment_not_behaviour(tmp_path):
    from mol.hcp.evolvable import evolvable
    from mol.hcp.loader import load

    head = 'schema_version = 1\nname = "t"\n[router]\nprompt = "Route."\n'
    (tmp_path / "plain.toml").write_text(head)
    (tmp_path / "traced.toml").write_text(head + '[telemetry]\ntraces = "otlp"\n'
                                          'endpoint = "http://collector:4318"\n')
    plain, traced = load(tmp_path / "plain.toml"), load(tmp_path / "traced.toml")
    assert plain.digest != traced.digest
    assert plain.behaviour_digest == traced.behaviour_digest  # eval results still apply
    # mol evolve never points traces elsewhere, even where every path is allowed.
    assert evolvable("/telemetry/endpoint", ["/*"]) == (
        "/telemetry/endpoint is never evolvable (/telemetry)")
