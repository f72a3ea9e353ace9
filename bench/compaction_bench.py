"""Compaction on a real engine: the prompt tokens evaluated per turn before and after it, and
the adapter's system prompt and tools still taken from the cache after it.

A session of one tool-using adapter (L2: the example's coding prompt, two tools) against the
local engine (llama.cpp, SmolLM2-135M, its 4,096-token window as the engine reports it),
every turn pinned to L2, with a threshold low enough that the view is compacted a few times.
A loopback proxy between mol and the engine keeps each answer's ``timings`` and ``usage``
(llama.cpp's own counts: ``mol.runtime.llamacpp.timings``), paired with mol's events.

Per turn it reports the prompt tokens llama.cpp evaluated for L2's answer (``prompt_n``, all
of the answer's requests), and for each compaction its own request. The prefix is measured on
the same engine: two requests with L2's system prompt and tools that differ from their first
conversation message on; the second's ``cache_n`` is the part before the conversation. After
a compaction, the first answer must take at least that prefix from the cache and evaluate
less than its prompt. Needs the 'local' extra:

    python bench/compaction_bench.py [--turns 24]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx

from mol.plugins import hookimpl

EXAMPLES = Path(__file__).resolve().parent.parent / "hcp" / "examples"
HCP = """
schema_version = 2
name = "compaction-bench"
[engine]
api_base = "http://127.0.0.1:9/v1"
model_prefix = "openai/"
routing_constraint = "grammar"
timeout_sec = 300
max_retries = 0
[router]
prompt = "Answer L2."
fallback = "L2"
[adapters.L0]
prompt = { path = "prompts/chat.md" }
[adapters.L2]
prompt = { path = "prompts/coding.md" }
params = { temperature = 0.0, max_tokens = 96 }
tools.allow = ["get_weather", "get_time"]
max_steps = 2
# Compacts after a handful of turns (the default, 0.8 of 4,096 tokens, takes dozens) and
# keeps a little verbatim, so one run sees several compactions.
[compaction]
threshold = 0.6
keep_recent_tokens = 300
max_tokens = 96
# Every turn is L2's: the cross-adapter summary would only add requests on L0.
[summary]
enabled = false
"""
TOPICS = ["binary search", "a linked list", "recursion", "hash maps", "unit tests",
          "list comprehensions", "exceptions", "generators", "decorators", "sorting",
          "regular expressions", "type hints", "dataclasses", "context managers",
          "string formatting", "virtual environments"]


class Tools:
    """L2's tools, as a plugin: local and instant, so a call costs nothing but its tokens.
    Their text is what matters here (part of the prefix the engine caches); the questions
    rarely call for them."""

    @hookimpl
    def mol_register_tools(self, register: Any) -> None:
        def get_weather(city: str) -> str:
            """The current weather in a city."""
            return f"Sunny and 21 degrees Celsius in {city}."

        def get_time(city: str) -> str:
            """The local time in a city."""
            return f"It is 14:05 in {city}."

        register(get_weather)
        register(get_time)


class Proxy:
    """A loopback proxy to the engine keeping each chat completion answered 200, in order."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.answers = upstream.rstrip("/"), []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        from starlette.requests import Request
        from starlette.responses import Response

        request = Request(scope, receive)
        body = await request.body()
        path = request.url.path.removeprefix("/v1")
        async with httpx.AsyncClient(timeout=300) as client:
            answer = await client.request(request.method, self.upstream + path, content=body,
                                          headers={"content-type": "application/json"})
        if path == "/chat/completions" and answer.status_code == 200:
            self.answers.append((json.loads(body), answer.json()))
        await Response(answer.content, answer.status_code,
                       media_type=answer.headers.get("content-type"))(scope, receive, send)


async def prefix_tokens(base_url: str, system: dict, tools: list) -> int:
    """Tokens L2's requests share before their conversation: the second of two requests that
    differ from their first user message on takes exactly those from the cache (a forced
    call: one evaluation each)."""
    cached = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:
        for text in ("alpha beta gamma", "one two three"):
            answer = (await client.post("/chat/completions", json={
                "model": "L2", "messages": [system, {"role": "user", "content": text}],
                "tools": tools, "max_tokens": 8, "temperature": 0,
                "tool_choice": {"type": "function", "function": {"name": "get_time"}}})).json()
            cached = answer["timings"]["cache_n"]
    return cached


def requests_of(results: list[Any], answers: list[tuple[dict, dict]]) -> list[dict[str, Any]]:
    """Each engine request of the session, in order: its turn, purpose (mol's event), what
    llama.cpp says it evaluated, and whether it is the first answer after a compaction."""
    calls = [(number, event) for number, result in enumerate(results, 1)
             for event in result.events if event.type in ("model_call", "compaction")]
    if sum(event.type == "model_call" for _, event in calls) != len(answers):
        raise SystemExit(f"{len(calls)} model calls but {len(answers)} answers recorded")
    requests, pending, compacted = [], iter(answers), False
    for number, event in calls:
        if event.type == "compaction":
            compacted = True
            continue
        _, answer = next(pending)
        first = compacted and event.purpose == "answer"
        requests.append({"turn": number, "purpose": event.purpose, "first_after": first,
                         "prompt_tokens": answer["usage"]["prompt_tokens"],
                         "cache_n": answer["timings"]["cache_n"],
                         "evaluated": answer["timings"]["prompt_n"]})
        compacted = compacted and not first
    return requests


async def serve_proxy(proxy: Proxy, task_group: Any) -> tuple[str, anyio.Event]:
    """Serve ``proxy`` on a free loopback port; its address and the event that stops it."""
    from mol.runtime import serving

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    ready, stop = anyio.Event(), anyio.Event()
    task_group.start_soon(lambda: serving.serve(proxy, sockets=[sock], ready=ready, until=stop,
                                                lifespan="off", log_level="warning"))
    await ready.wait()
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1", stop


async def run(turns: int) -> tuple[list[dict[str, Any]], int]:
    """Play the session; its requests and the measured prefix."""
    from mol.hcp.loader import load_text
    from mol.plugins.manager import PluginManager
    from mol.runtime import open_runtime
    from mol.runtime.llamacpp.supervisor import LocalEngine, LocalEngineConfig

    artifact = load_text(HCP, base_dir=EXAMPLES)
    plugins = PluginManager(None, builtin=(), extra=[("bench-tools", Tools())])
    config = LocalEngineConfig(port=0, adapters=("L0", "L2"), tool_adapters=frozenset({"L2"}))
    results = []
    async with LocalEngine(config, progress=None) as engine, anyio.create_task_group() as tg:
        proxy = Proxy(engine.base_url)
        url, stop = await serve_proxy(proxy, tg)
        async with open_runtime(artifact, engine_url=url, plugins=plugins) as runtime, \
                runtime.session() as session:
            for number in range(turns):
                topic = TOPICS[number % len(TOPICS)]
                text = (f"Explain {topic} in Python with a short example." if number % 2 == 0
                        else f"What mistakes do people make with {topic}?")
                results.append(await session.turn(text, adapter="L2"))
                print(f"  turn {number + 1:2}: {results[-1].status}", file=sys.stderr,
                      flush=True)
        first_l2 = next(body for body, _ in proxy.answers if body["model"] == "L2")
        prefix = await prefix_tokens(engine.base_url, first_l2["messages"][0],
                                     first_l2["tools"])
        stop.set()
    return requests_of(results, proxy.answers), prefix


def figures(requests: list[dict[str, Any]], turns: int, prefix: int) -> dict[str, Any]:
    """The medians and ratios of one run."""
    median = statistics.median
    answers = [r for r in requests if r["purpose"] == "answer"]
    compacting = [r for r in requests if r["purpose"] == "compaction"]
    firsts = [r for r in answers if r["first_after"]]
    start = min((r["turn"] for r in compacting), default=turns + 1)
    per_turn = [sum(r["evaluated"] for r in answers if r["turn"] == n) for n in
                range(1, turns + 1)]
    # Warm requests before the first compaction (the first turn's first is cold), and the
    # ones after it that follow no compaction: each extends the one before it.
    warm_before = [r for r in answers[1:] if r["turn"] < start]
    warm_after = [r for r in answers if r["turn"] >= start and not r["first_after"]]
    out: dict[str, Any] = {
        "benchmark": "compaction_prefix_reuse", "model": "SmolLM2-135M-Instruct",
        "window": 4096, "turns": turns, "requests": len(requests),
        "compactions": len(compacting), "prefix_tokens": prefix,
        "first_compaction_turn": start if compacting else None,
        "evaluated_per_turn": per_turn,
    }
    if not (warm_before and firsts and warm_after):
        return out
    out.update({
        "evaluated_per_turn_median_before": median(per_turn[:start - 1][1:] or [0]),
        "evaluated_per_turn_median_after": median(per_turn[start - 1:]),
        "warm_request_evaluated_median_before": median(r["evaluated"] for r in warm_before),
        "warm_request_evaluated_median_after": median(r["evaluated"] for r in warm_after),
        "first_after_evaluated_median": median(r["evaluated"] for r in firsts),
        "first_after_prompt_tokens_median": median(r["prompt_tokens"] for r in firsts),
        "first_after_cached_min": min(r["cache_n"] for r in firsts),
        "compaction_request_evaluated_median": median(r["evaluated"] for r in compacting),
        "compaction_request_prompt_tokens_median": median(r["prompt_tokens"] for r in compacting),
        "compaction_request_cached_median": median(r["cache_n"] for r in compacting),
        "prefix_reused_after_every_compaction": all(
            r["cache_n"] >= prefix and r["evaluated"] < r["prompt_tokens"] for r in firsts),
    })
    out["ratio_first_after_over_warm_before"] = round(
        out["first_after_evaluated_median"] / max(out["warm_request_evaluated_median_before"], 1),
        2)
    out["ratio_warm_after_over_warm_before"] = round(
        out["warm_request_evaluated_median_after"]
        / max(out["warm_request_evaluated_median_before"], 1), 2)
    return out


def main() -> None:
    """Run the session, print each request on stderr and one JSON line on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=24)
    turns = parser.parse_args().turns
    requests, prefix = anyio.run(run, turns)
    print(f"L2's system prompt and tools: {prefix} tokens", file=sys.stderr)
    for r in requests:
        mark = " <- first after a compaction" if r["first_after"] else ""
        print(f"turn {r['turn']:2} {r['purpose']:10} prompt {r['prompt_tokens']:5}, cached "
              f"{r['cache_n']:5}, evaluated {r['evaluated']:5}{mark}", file=sys.stderr)
    result = figures(requests, turns, prefix)
    for key in ("evaluated_per_turn_median_before", "evaluated_per_turn_median_after",
                "warm_request_evaluated_median_before", "warm_request_evaluated_median_after",
                "first_after_evaluated_median", "first_after_cached_min",
                "compaction_request_evaluated_median", "ratio_first_after_over_warm_before",
                "ratio_warm_after_over_warm_before", "prefix_reused_after_every_compaction"):
        print(f"{key:40} {result.get(key)}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
