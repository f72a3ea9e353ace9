"""Abusive bodies: nesting, message counts and content items each meet a 400 naming the
limit, and a large history costs bounded memory without stalling other requests."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from mol.runtime.testing import ScriptedEngine
from mol.server.api.messages import MAX_ITEMS, MAX_MESSAGES
from mol.server.http.bodies import MAX_DEPTH

from .conftest import serve_app

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
times = -1
reply = "fine"
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        yield server


def post(served, body: bytes | dict, path: str = "/chat/completions") -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(served.url + path, content=data, timeout=60, headers={
        "Authorization": f"Bearer {served.key}", "Content-Type": "application/json"})


def rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10**5])
def test_deep_nesting_is_a_400_naming_the_limit(served, depth):
    deep = b'{"model": "mol", "messages": [{"role": "user", "content": "x"}], "metadata": ' \
           + b"[" * depth + b"]" * depth + b"}"
    answer = post(served, deep)
    assert answer.status_code == 400, answer.text
    assert f"nests deeper than {MAX_DEPTH} levels" in answer.json()["error"]["message"]


def user(n: int) -> dict:
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"m{n}"}


@pytest.mark.parametrize("path,field", [("/chat/completions", "messages"),
                                        ("/responses", "input")])
def test_too_many_messages_is_a_400_naming_the_limit(served, path, field):
    body = {"model": "mol", field: [user(n) for n in range(100_000)] + [user(0)]}
    before = rss()
    answer = post(served, body, path)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == field and f"at most {MAX_MESSAGES}" in error["message"]
    assert rss() - before < 150 << 20  # was +410 MB: the history copied into every view


def test_too_many_content_parts_is_a_400_naming_the_limit(served):
    parts = [{"type": "text", "text": "a"}] * (MAX_ITEMS + 1)
    answer = post(served, {"model": "mol", "messages": [{"role": "user", "content": parts}]})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "messages[0].content" and f"at most {MAX_ITEMS}" in error["message"]


# aiohttp (under litellm) advises against engine requests over 1 MB sent as bytes; this
# history makes one, which is the point here.
@pytest.mark.filterwarnings("ignore:Sending a large body directly")
def test_a_history_at_the_limit_does_not_stall_other_requests(served):
    body = {"model": "mol", "messages": [{"role": "user" if n % 2 == 0 else "assistant",
                                          "content": "x" * 700} for n in range(MAX_MESSAGES - 1)]}
    stalls: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=30) as client:
            while not done.is_set():
                started = time.monotonic()
                client.get(served.url.removesuffix("/v1") + "/health")
                stalls.append(time.monotonic() - started)
                time.sleep(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        before = rss()
        for _ in range(3):
            answer = post(served, body)
            assert answer.status_code == 200, answer.text
        grown = rss() - before
    finally:
        done.set()
        prober.join()
    assert max(stalls) < 1.5, sorted(stalls)[-5:]
    assert grown < 400 << 20, grown >> 20
