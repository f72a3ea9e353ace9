"""``GET /metrics`` (Prometheus text format, behind the key) parses with
``prometheus_client.parser`` and moves when turns run; streamed replies send SSE comment
keep-alives while a turn is quiet."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app

SCRIPT = """
[[L0]]
constrained = true
when = "loud|slow"
times = -1
reply = "L1"
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
usage = { prompt_tokens = 100, completion_tokens = 2, cached_tokens = 60 }
[[L0]]
constrained = false
times = -1
reply = "Noted."

[[L1]]
when = "loud"
times = -1
tool_calls = [{ name = "shout", arguments = { text = "hi" } }]
[[L1]]
when = "slow"
delay = 1.2
times = -1
reply = "Slowly."
[[L1]]
times = -1
reply = "Shouted."
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("metrics")
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp, engine.base_url, keepalive=0.3) as server:
        yield server


def scrape(served) -> dict[tuple[str, tuple], float]:
    answer = httpx.get(served.url.removesuffix("/v1") + "/metrics", timeout=30,
                       headers={"Authorization": f"Bearer {served.key}"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith(
        "text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text)
            for s in family.samples}


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_need_the_key(served):
    answer = httpx.get(served.url.removesuffix("/v1") + "/metrics", timeout=30)
    assert answer.status_code == 401


def test_metrics_move_when_turns_run(served):
    before = scrape(served)
    client = served.client()
    assert client.chat.completions.create(model="mol", messages=[
        {"role": "user", "content": "be loud"}]).choices[0].message.content == "Shouted."
    assert client.chat.completions.create(model="L0", messages=[
        {"role": "user", "content": "hello"}]).choices[0].message.content == "Noted."
    after = scrape(served)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    chat = {"route": "/v1/chat/completions", "status": "200"}
    assert moved("mol_http_requests_total", **chat) == 2
    assert moved("mol_route_decisions_total", adapter="L1", how="routed") == 1
    assert moved("mol_route_decisions_total", adapter="L0", how="pinned") == 1
    assert moved("mol_hop_seconds_count", hop="route", adapter="L0") == 1
    assert moved("mol_hop_seconds_count", hop="answer", adapter="L1") == 1
    assert moved("mol_tool_calls_total", source="plugin") == 1
    assert moved("mol_tool_seconds_count", source="plugin") == 1
    assert moved("mol_prompt_tokens_total", adapter="L1") > 0
    assert value(after, "mol_queue_depth") == 0
    # The summaries (they run after the replies) report a cached share of their prompts.
    summaries = scrape(served)
    assert value(summaries, "mol_hop_seconds_count", hop="summary", adapter="L0") >= 1
    assert 0 < value(summaries, "mol_cached_token_ratio", adapter="L0") < 1


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_streams_send_keep_alives_while_the_turn_is_quiet(served, path):
    body = ({"messages": [{"role": "user", "content": "slow please"}]} if "chat" in path
            else {"input": "slow please"})
    lines = []
    with httpx.stream("POST", served.url + path, json={"model": "mol", "stream": True, **body},
                      headers={"Authorization": f"Bearer {served.key}"}, timeout=60) as answer:
        assert answer.status_code == 200
        lines = list(answer.iter_lines())
    kept = [i for i, line in enumerate(lines) if line == ": keep-alive"]
    # The 1.2 s engine delay, with keep-alives every 0.3 s, before the text arrives.
    text = next(i for i, line in enumerate(lines) if '"Slo"' in line)  # the first delta
    assert len(kept) >= 2 and kept[0] < text, lines
    if path == "/responses":  # usage is always in response.completed
        [done] = [json.loads(line.removeprefix("data: ")) for line in lines
                  if line.startswith("data: ") and "response.completed" in line]
        assert done["response"]["usage"]["total_tokens"] > 0
