"""Traces in a real OTLP receiver (Arize Phoenix), read back through its own API: a
``mol serve`` turn with an MCP tool call continuing a client's ``traceparent``, message text
kept out unless capture is asked for, gRPC and the HCP's ``[telemetry]``, and an eval run
whose episodes are its children (with the sandbox commands under their tool calls)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import mcp_attributes

from mol.hcp.loader import load
from mol.runtime.testing import ScriptedEngine

from .conftest import PASS, free_port, hcp_text, mol, span_id, tree, write_task

pytestmark = [pytest.mark.phoenix, pytest.mark.slow]

KEY = "sk-test-tracing-5b1e"
QUESTION = "what time is it, secret-question-7Q2"
ANSWER = "It is tea time, secret-answer-9K4."
SUMMARY = "Summary: secret-summary-3J8."
SECRETS = ("secret-question-7Q2", "secret-answer-9K4", "secret-summary-3J8", "Europe/Oslo")
"""Message text of the turn (the tool's argument too): none of it may reach a span unless
content capture is on."""

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "{summary}"
[[act-lora]]
when = "^what time"
times = -1
tool_calls = [{ name = "mcp__time__get_current_time", arguments = { timezone = "Europe/Oslo" } }]
[[act-lora]]
times = -1
reply = "{answer}"
""".replace("{summary}", SUMMARY).replace("{answer}", ANSWER)

HCP = hcp_text(f"""\
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
max_retries = 0
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
engine_name = "act-lora"
mcp_servers = ["time"]
tools.allow = ["mcp__time__get_current_time"]
[mcp_servers.time]
command = "{sys.executable}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
startup_timeout_sec = 60
required = true
[session]
store = "sqlite:///{{store}}"
""", name="traced")


class Serve:
    """``mol serve`` as a real process (this venv's), tracing as ``env`` and ``extra`` say."""

    def __init__(self, tmp: Path, engine_url: str, env: dict[str, str], extra: str = "") -> None:
        self.hcp = tmp / "traced.toml"
        self.hcp.write_text(HCP.format(store=tmp / "sessions.db") + extra)
        (tmp / "key").write_text(KEY + "\n")
        environ = {key: value for key, value in os.environ.items()
                   if not key.startswith("OTEL_")}
        environ.update(MOL_API_KEY_FILE=str(tmp / "key"), LITELLM_LOCAL_MODEL_COST_MAP="True",
                       OTEL_BSP_SCHEDULE_DELAY="200", **env)
        self.port = free_port()
        self.log = tmp / "serve.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mol.cli", "serve", "--hcp", str(self.hcp), "--port",
                 str(self.port), "--engine-url", engine_url, "--drain", "5"],
                stdout=out, stderr=subprocess.STDOUT, env=environ)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 90
        while True:  # /health is 200 once the required MCP server is ready
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "mol serve did not get healthy"
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

    def chat(self, text: str, headers: dict[str, str] | None = None) -> httpx.Response:
        reply = httpx.post(self.url + "/v1/chat/completions", timeout=60,
                           headers={"Authorization": f"Bearer {KEY}", **(headers or {})},
                           json={"model": "mol", "messages": [{"role": "user", "content": text}]})
        assert reply.status_code == 200, reply.text
        return reply

    def stop(self) -> None:
        """SIGTERM: the server drains and the tracer exports what it still holds."""
        self.proc.terminate()
        self.proc.wait(timeout=30)


def named(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"].startswith(prefix)]


def has_turn(spans: list[dict[str, Any]]) -> bool:
    """The turn's span and its summary's chat span are in (both end last)."""
    return any(s["attributes"].get("mol.hop") == "summary" for s in spans) and bool(
        named(spans, gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value))


def text_in(spans: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(span, secret) for each secret found anywhere in a span's attributes or events."""
    return [(span["name"], secret) for span in spans for secret in SECRETS
            if secret in json.dumps([span["attributes"], span["events"]])]


def test_a_serve_turn_with_a_tool_call_continues_the_clients_trace(tmp_path, phoenix):
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    with ScriptedEngine.serve(SCRIPT) as engine:
        serve = Serve(tmp_path, engine.base_url, {
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        try:
            reply = serve.chat(QUESTION, {"traceparent": f"00-{trace_id}-{client_span}-01"})
        finally:
            serve.stop()
    assert reply.json()["choices"][0]["message"]["content"] == ANSWER
    # The response names the trace the client's span began, and the server's span in it.
    version, answered_trace, server_span, flags = reply.headers["traceresponse"].split("-")
    assert (version, answered_trace, flags) == ("00", trace_id, "01")

    spans = phoenix.wait(trace_id, has_turn)
    children = tree(spans)
    [request] = children[client_span]
    assert span_id(request) == server_span
    assert request["name"] == "POST /v1/chat/completions"
    assert request["attributes"]["http.response.status_code"] == 200
    [turn] = children[server_span]
    attributes = turn["attributes"]
    artifact = load(serve.hcp)
    assert turn["name"] == f"invoke_agent {artifact.name}"
    assert attributes[gen_ai.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert attributes[gen_ai.GEN_AI_AGENT_NAME] == "traced"
    assert attributes["mol.hcp.digest"] == artifact.digest
    assert attributes[gen_ai.GEN_AI_CONVERSATION_ID] == attributes["session.id"]
    assert attributes[gen_ai.GEN_AI_CONVERSATION_ID].startswith("conv_")
    assert attributes["mol.route.adapter"] == "L1" and attributes["mol.route.fallback"] is False
    assert attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] > 0

    below = children[span_id(turn)]
    chats = sorted(named(below, "chat "), key=lambda span: span["start_time"])
    assert [c["attributes"]["mol.hop"] for c in chats] == ["route", "answer", "answer", "summary"]
    # The model is the engine's name of the adapter's LoRA (L1's is act-lora).
    assert [c["attributes"][gen_ai.GEN_AI_REQUEST_MODEL] for c in chats] == [
        "L0", "act-lora", "act-lora", "L0"]
    assert [c["name"] for c in chats] == ["chat L0", "chat act-lora", "chat act-lora", "chat L0"]
    for chat in chats:
        assert chat["attributes"][gen_ai.GEN_AI_OPERATION_NAME] == "chat"
        assert chat["attributes"][gen_ai.GEN_AI_USAGE_INPUT_TOKENS] > 0
        assert chat["attributes"][gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
        assert gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS in chat["attributes"]
    assert chats[0]["attributes"]["mol.route.labels"] == ["L0", "L1", "L2", "L3"]
    assert chats[1]["attributes"][gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ["tool_calls"]
    assert chats[2]["attributes"][gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]

    [tool] = named(below, "execute_tool ")
    assert tool["name"] == "execute_tool mcp__time__get_current_time"
    assert tool["attributes"][gen_ai.GEN_AI_TOOL_NAME] == "mcp__time__get_current_time"
    assert tool["attributes"]["mol.tool.source"] == "mcp:time"
    assert tool["attributes"]["mol.tool.kind"] == "mcp"
    # Between the answer step that asked for it and the one that read its result.
    assert chats[1]["end_time"] <= tool["start_time"] <= tool["end_time"] <= chats[2]["start_time"]
    [call] = children[span_id(tool)]
    assert call["name"] == "tools/call get_current_time"
    assert call["attributes"][mcp_attributes.MCP_METHOD_NAME] == "tools/call"
    assert call["attributes"]["mol.mcp.server"] == "time"

    # Content capture is off: no message text anywhere, nor the tool's argument.
    assert text_in(spans) == []
    assert not any(key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg"))
                   for span in spans for key in span["attributes"])


def test_capture_over_grpc_from_the_hcp_table_and_a_root_without_traceparent(tmp_path,
                                                                            phoenix):
    with ScriptedEngine.serve(SCRIPT) as engine:
        serve = Serve(tmp_path, engine.base_url, {}, extra=(
            f'[telemetry]\ntraces = "otlp"\nendpoint = "{phoenix.grpc_url}"\n'
            'protocol = "grpc"\ncapture_content = true\n'))
        try:
            reply = serve.chat(QUESTION)
        finally:
            serve.stop()
    _, trace_id, server_span, _ = reply.headers["traceresponse"].split("-")
    spans = phoenix.wait(trace_id, has_turn)
    [request] = tree(spans)[None]  # no traceparent: the request's span is the root
    assert span_id(request) == server_span
    [turn] = named(spans, "invoke_agent ")
    assert json.loads(turn["attributes"][gen_ai.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    [tool] = named(spans, "execute_tool ")
    assert json.loads(tool["attributes"][gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS]) == {
        "timezone": "Europe/Oslo"}
    found = {secret for _, secret in text_in(spans)}
    assert found == set(SECRETS)


EVAL_SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L0]]
constrained = false
times = -1
reply = "Summary."
[[L2]]
when = "step done"
times = -1
reply = "Finished."
[[L2]]
when = "Task number"
times = -1
tool_calls = [{ name = "terminal", arguments = { command = "echo step done" } }]
"""


@pytest.mark.docker
def test_an_eval_runs_episodes_are_children_of_the_runs_span(tmp_path, phoenix, capsys,
                                                            monkeypatch):
    for n in range(2):
        write_task(tmp_path / "suite", f"task-{n}", test=PASS, instruction=f"Task number {n}.\n")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(hcp_text("[engine]\nmax_retries = 0\n[adapters.L2]\nprompt = \"You code.\"\n"
                            "tools.allow = [\"terminal\"]\n"))
    run = tmp_path / "run"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url)
    with ScriptedEngine.serve(EVAL_SCRIPT) as engine:
        code, _, err = mol(capsys, "eval", "run", tmp_path / "suite", "--hcp", hcp,
                           "--engine-url", engine.base_url, "--out", run, "-j", "2")
    assert code == 0, err

    def whole(spans: list[dict[str, Any]]) -> bool:
        return sum(span["name"].startswith("mol.eval.episode") for span in spans) == 2

    [root] = [span for span in phoenix.wait(None, lambda spans: any(
        span["attributes"].get("mol.eval.run") == str(run) for span in spans))
        if span["attributes"].get("mol.eval.run") == str(run)]
    spans = phoenix.wait(root["context"]["trace_id"], whole)
    children = tree(spans)
    assert root["name"] == "mol.eval.run suite" and root["parent_id"] is None
    assert root["attributes"]["mol.hcp.digest"] == load(hcp).digest
    episodes = children[span_id(root)]
    assert sorted(e["attributes"]["mol.eval.task"] for e in episodes) == ["task-0", "task-1"]
    for episode in episodes:
        assert episode["attributes"]["mol.eval.outcome"] == "pass"
        [turn, *rest] = sorted(children[span_id(episode)], key=lambda span: span["start_time"])
        assert turn["name"] == "invoke_agent test"
        # Then the verifier's commands, in the episode's sandbox.
        assert rest and {span["name"] for span in rest} == {"mol.sandbox run"}
        below = children[span_id(turn)]
        [tool] = named(below, "execute_tool ")
        assert tool["attributes"]["mol.tool.kind"] == "sandbox"
        # The sandbox command under the tool call that ran it (its text is content: left out).
        [command] = children[span_id(tool)]
        assert command["name"] == "mol.sandbox run"
        assert command["attributes"]["mol.sandbox.exit_code"] == 0
        assert "mol.sandbox.command" not in command["attributes"]
