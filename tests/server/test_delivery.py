"""A reply's end goes out before the turn's bookkeeping: the summary hop's engine request
starts only once the reply's last byte was handed to the connection (``Job.delivered``)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import KEY, serve_app

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
[[L0]]
constrained = false
times = -1
reply = "An answer in a few words, streamed word by word."
"""


class Clock:
    """When the engine received each summary request (monotonic seconds)."""

    def __init__(self) -> None:
        self.summaries: list[float] = []
        self.sent: list[float] = []
        """When each reply's last byte was handed to the connection."""
        self.arrived = threading.Condition()

    def __call__(self, record: dict) -> None:
        if record["body"]["messages"][-1]["content"].startswith("User: "):
            with self.arrived:
                self.summaries.append(time.monotonic())
                self.arrived.notify_all()

    def wrap(self, app):
        """``app``, noting when each reply's last byte was handed to the connection: what
        the server can know of delivery (the client reads it a moment later)."""
        async def timed(scope, receive, send):
            async def sending(message):
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    with self.arrived:
                        self.sent.append(time.monotonic())
                        self.arrived.notify_all()
            await app(scope, receive, sending)
        return timed

    def summary_after(self, count: int) -> float:
        return self._nth(self.summaries, count)

    def sent_after(self, count: int) -> float:
        return self._nth(self.sent, count)

    def _nth(self, times: list[float], count: int) -> float:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(times) > count, timeout=30)
            return times[count]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    clock = Clock()
    with ScriptedEngine.serve(SCRIPT, on_request=clock) as engine, \
            serve_app(tmp_path_factory.mktemp("delivery"), engine.base_url,
                      wrap=clock.wrap) as server:
        server.clock = clock
        yield server


def _last_byte(served, path: str, body: dict) -> float:
    """Monotonic time at which the server handed the reply's last byte to the connection."""
    headers = {"authorization": f"Bearer {KEY}"}
    before = len(served.clock.sent)
    with httpx.Client(base_url=served.url, headers=headers, timeout=30) as client, \
            client.stream("POST", path, json=body) as reply:
        assert reply.status_code == 200, reply.read()
        for _ in reply.iter_bytes():
            pass
    return served.clock.sent_after(before)


CASES = [
    ("/chat/completions", {"model": "mol", "stream": True,
                           "messages": [{"role": "user", "content": "hello there"}]}),
    ("/chat/completions", {"model": "mol",
                           "messages": [{"role": "user", "content": "hello again"}]}),
    ("/responses", {"model": "mol", "stream": True, "input": "a streamed response"}),
    ("/responses", {"model": "mol", "input": "a plain response"}),
]


@pytest.mark.parametrize(("path", "body"), CASES,
                         ids=["chat-stream", "chat", "responses-stream", "responses"])
def test_the_summary_hop_starts_after_the_reply_was_delivered(served, path, body):
    before = len(served.clock.summaries)
    ended = _last_byte(served, path, body)
    assert served.clock.summary_after(before) >= ended


def test_a_stream_ends_with_its_finish_chunk_and_done(served):
    body = {"model": "mol", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "count the chunks"}]}
    headers = {"authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=served.url, headers=headers, timeout=30) as client:
        lines = [line for line in client.post("/chat/completions", json=body).text.splitlines()
                 if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    finish = [json.loads(line[6:]) for line in lines[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in finish if c["choices"]][-1] == "stop"
    assert finish[-1]["choices"] == [] and finish[-1]["usage"]["completion_tokens"] > 0
