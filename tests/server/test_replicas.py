"""Two ``mol serve`` replicas on one PostgreSQL store, reached through the official
``openai`` client: conversations continue on either replica, a replica killed mid-turn
loses nothing it acknowledged, and concurrent turns on one conversation get one winner."""

from __future__ import annotations

import json
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, KEY, STARTED, WEATHER_TOOL, answers
from .processes import Server, engine_saw, in_background, until

pytestmark = [pytest.mark.slow]

SCRIPT = """
[[L0]]
constrained = true
when = "weather"
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
[[L0]]
constrained = false
when = "slow answer"
delay = 30
times = -1
reply = "never sent"
[[L0]]
constrained = false
when = "long hold"
delay = 3
times = -1
reply = "held"
[[L0]]
constrained = false
times = -1
reply = "noted"

[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
[[L1]]
when = "^sunny"
times = -1
reply = "It is sunny in Paris."
"""

LEASE = 3.0


@pytest.fixture(scope="module")
def store(postgres_cluster) -> str:
    """One database for the module's replicas."""
    return postgres_cluster.database()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, store):
    """The scripted engine and two replicas sharing ``store``; the first runs under another
    host name, so its leases are those of a remote machine (only expiry frees them). The
    last test kills it."""
    tmp = tmp_path_factory.mktemp("replicas")
    hcp = tmp / "served.toml"
    hcp.write_text(HCP.format(store="unused") + f"lease = {LEASE}\n")
    env = {"MOL_SESSION_STORE": store}
    with ScriptedEngine.serve(SCRIPT) as engine:
        log = tmp / "replicas.log"
        with ThreadPoolExecutor(2) as starting:  # each start waits for /health
            started = [starting.submit(Server, tmp, engine.base_url, log, env=env, host=host,
                                       hcp=hcp) for host in ("replica-a", None)]
            first, second = (future.result() for future in started)
        for server in (first, second):  # they outlive a test: this fixture kills them
            STARTED.remove(server.proc)
        try:
            yield engine, first, second
        finally:
            for server in (first, second):
                server.kill()


def retrying(server: Server) -> openai.OpenAI:
    """A client as applications use it: the default retries (409 and 429 included)."""
    return openai.OpenAI(base_url=server.url, api_key=KEY, timeout=60)


def answers_to(engine, adapter: str, text: str) -> list[dict]:
    """The messages of the answer request whose last message is ``text``."""
    return next(b["messages"] for b in reversed(answers(engine, adapter))
                if b["messages"][-1]["content"] == text)


def stored(url: str, session: str) -> dict:
    shown = subprocess.run(["mol", "sessions", "show", "--store", url, "--json", session],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_conversations_continue_on_either_replica(replicas):
    engine, a, b = replicas
    with retrying(a) as on_a, retrying(b) as on_b:
        r1 = on_a.responses.create(model="mol", input="the first turn")
        r2 = on_b.responses.create(model="mol", input="the second turn",
                                   previous_response_id=r1.id)
        r3 = on_a.responses.create(model="mol", input="the third turn",
                                   previous_response_id=r2.id)
        assert on_b.responses.retrieve(r3.id).previous_response_id == r2.id
        # A Chat Completions conversation with a client tool round trip across replicas.
        messages = [{"role": "user", "content": "what is the weather?"}]
        asked = on_b.chat.completions.create(model="mol", messages=messages,
                                             tools=[WEATHER_TOOL])
        [call] = asked.choices[0].message.tool_calls
        assert asked.choices[0].finish_reason == "tool_calls" and call.id.startswith("call_L1_")
        messages += [asked.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"}]
        told = on_a.chat.completions.create(model="mol", messages=messages,
                                            tools=[WEATHER_TOOL])
        assert told.choices[0].message.content == "It is sunny in Paris."
        messages += [{"role": "assistant", "content": "It is sunny in Paris."},
                     {"role": "user", "content": "thanks, and hello"}]
        last = on_b.chat.completions.create(model="mol", messages=messages)
    assert [r.output_text for r in (r1, r2, r3)] == ["noted"] * 3
    assert last.choices[0].message.content == "noted"
    chain = answers_to(engine, "L0", "the third turn")
    assert [m["content"] for m in chain if m["role"] != "system"] == [
        "the first turn", "noted", "the second turn", "noted", "the third turn"]
    # The tool result reached the issuing adapter's own view on the other replica ...
    view = answers_to(engine, "L1", "sunny, 24 C")
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool"]
    assert view[2]["tool_calls"][0]["id"] == call.id
    # ... and the chat adapter's next turn, on the other one again, continues the stored
    # conversation: it carries that turn's summary, not a re-seeded copy of the history.
    chat = answers_to(engine, "L0", "thanks, and hello")
    assert not any(m["content"] == "what is the weather?" for m in chat)
    assert any("summary" in str(m["content"]) for m in chat[1:-1])


def test_concurrent_turns_on_one_conversation_have_one_winner(replicas, store):
    engine, a, b = replicas
    r1 = a.client.responses.create(model="mol", input="the first turn of two")
    start, outcomes = threading.Barrier(2), {}

    def turn(name: str, server: Server) -> None:
        start.wait()
        try:
            outcomes[name] = server.client.responses.create(
                model="mol", input=f"a long hold from {name}", previous_response_id=r1.id)
        except openai.APIStatusError as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=turn, args=(n, s)) for n, s in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [o for o in outcomes.values() if not isinstance(o, Exception)]
    lost = [o for o in outcomes.values() if isinstance(o, Exception)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert won[0].output_text == "held"
    assert lost[0].status_code == 409 and lost[0].body["code"] == "conversation_busy"
    assert "Retry-After" in lost[0].response.headers
    # The store holds the winner's turn only, on the head the first turn left.
    turns = turns_of(store, "the first turn of two")
    assert [t["status"] for t in turns] == ["complete", "complete"]
    assert turns[1]["user"].startswith("a long hold from") and turns[1]["answer"] == "held"
    assert sum(engine_saw(engine, f"a long hold from {n}", constrained=False)
               for n in "ab") == 1


def test_a_replica_killed_mid_turn_is_taken_over_after_its_lease(replicas, store):
    engine, a, b = replicas
    r1 = a.client.responses.create(model="mol", input="the first turn of three")
    r2 = b.client.responses.create(model="mol", input="the second turn",
                                   previous_response_id=r1.id)
    pending = in_background(lambda: a.client.responses.create(
        model="mol", input="a slow answer", previous_response_id=r2.id))
    until(lambda: engine_saw(engine, "slow answer", constrained=False), 30)
    a.kill()
    pending.join()
    # The dead replica's lease still runs: the conversation is busy, and says for how long.
    with pytest.raises(openai.ConflictError) as caught:
        b.client.responses.create(model="mol", input="too soon", previous_response_id=r2.id)
    assert caught.value.body["code"] == "conversation_busy"
    assert 1 <= int(caught.value.response.headers["Retry-After"]) <= LEASE
    with retrying(b) as on_b:  # the client's own retries outlast the lease
        r3 = on_b.responses.create(model="mol", input="the third turn",
                                   previous_response_id=r2.id)
    assert r3.output_text == "noted"
    # Everything the clients were told is stored; the killed turn is marked interrupted
    # and the conversation went on in place after it.
    for told in (r1, r2, r3):
        assert b.client.responses.retrieve(told.id).output_text == told.output_text
    turns = turns_of(store, "the first turn of three")
    assert [(t["user"], t["status"], t["answer"]) for t in turns] == [
        ("the first turn of three", "complete", "noted"), ("the second turn", "complete", "noted"),
        ("a slow answer", "interrupted", ""), ("the third turn", "complete", "noted")]


def turns_of(url: str, first_user_text: str) -> list[dict]:
    """The stored turns of the session whose first turn said ``first_user_text``."""
    listed = subprocess.run(["mol", "sessions", "list", "--store", url, "--json"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    for session in json.loads(listed.stdout):
        turns = stored(url, session["id"])["turns"]
        if turns and turns[0]["user"] == first_user_text:
            return turns
    raise AssertionError(f"no session starts with {first_user_text!r}")
