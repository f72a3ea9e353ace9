"""``Idempotency-Key``: a retried POST returns the stored result instead of running the turn
again; the same key on another request is a 409."""

from __future__ import annotations

import threading

import httpx
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L3"
[[L3]]
when = "slow"
times = -1
delay = 2
reply = "slowly"
[[L3]]
times = -1
reply = "<Card/>"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("idem")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        server.engine = engine
        yield server


def post(served, body, key=None, path="/chat/completions"):
    headers = {"Authorization": f"Bearer {served.key}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(served.url + path, json=body, headers=headers, timeout=60)


def turns(served) -> int:
    return len(served.engine.requests_for("L3"))


CHAT = {"model": "mol", "messages": [{"role": "user", "content": "draw a card"}]}


@pytest.mark.parametrize("path,body", [
    ("/chat/completions", CHAT),
    ("/chat/completions", {**CHAT, "stream": True}),
    ("/responses", {"model": "mol", "input": "draw a card"}),
])
def test_a_retry_with_the_same_key_replays_the_stored_result(served, path, body):
    key = f"retry-{path}-{body.get('stream')}"
    first = post(served, body, key, path)
    ran = turns(served)
    again = post(served, body, key, path)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content  # the same reply, byte for byte (ids included)
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert turns(served) == ran  # the turn did not run twice


def test_without_a_key_each_post_runs(served):
    ran = turns(served)
    one, two = post(served, CHAT), post(served, CHAT)
    assert one.json()["id"] != two.json()["id"] and turns(served) == ran + 2


def test_the_same_key_on_a_different_request_is_a_409(served):
    assert post(served, CHAT, "reused").status_code == 200
    ran = turns(served)
    other = post(served, {**CHAT, "messages": [{"role": "user", "content": "another"}]},
                 "reused")
    assert other.status_code == 409 and turns(served) == ran
    assert "Idempotency-Key" in other.json()["error"]["message"]
    assert post(served, CHAT, "reused", "/responses").status_code == 409  # another route


def test_a_retry_while_the_first_still_runs_is_a_409_and_runs_nothing(served):
    body = {"model": "mol", "messages": [{"role": "user", "content": "slow one"}]}
    first: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: first.append(post(served, body, "in-flight")))
    thread.start()
    try:
        while not any("slow one" in str(r["body"]) for r in served.engine.requests_for("L3")):
            thread.join(0.05)
        ran = turns(served)
        during = post(served, body, "in-flight")
        assert during.status_code == 409 and during.headers["retry-after"] == "1"
        assert turns(served) == ran
    finally:
        thread.join()
    assert first[0].status_code == 200
    assert post(served, body, "in-flight").content == first[0].content


@pytest.mark.parametrize("key", ["", "x" * 256, "naïve", "two words"])
def test_a_malformed_key_is_a_400(served, key):
    answer = httpx.post(served.url + "/chat/completions", json=CHAT, timeout=30, headers={
        "Authorization": f"Bearer {served.key}", "Idempotency-Key": key.encode("utf-8")})
    assert answer.status_code == 400 and "Idempotency-Key" in answer.json()["error"]["message"]
