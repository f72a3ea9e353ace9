"""Generated UI through mol serve: the official openai client sees ``metadata.genui`` on chat
completions and the ``mol.genui`` output item on responses; ``GET /ui/{id}`` serves the
preview of a stored response behind the API key."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import KEY, serve_app

BOOKING = (Path(__file__).parents[1] / "genui" / "data" / "booking.jsonl").read_text()
COUNTER = (Path(__file__).parents[1] / "genui" / "data" / "counter.tsx").read_text()
RSVP = (Path(__file__).parents[1] / "genui" / "data" / "rsvp-v0.9.1.jsonl").read_text()
"""An A2UI stream of the current v0.9 spec, version ``v0.9.1``."""
ANSWER = f"Here you go.\n\n```a2ui\n{BOOKING.strip()}\n```\n"
BROKEN = "```ui4a/tsx\nexport default function App() { return <p>{</p>; }\n```\n"
SCRIPT = {
    "L0": [{"constrained": False, "reply": "summary", "times": -1}],
    "L3": [{"when": "broken", "reply": BROKEN, "times": -1},
           {"when": "counter", "reply": f"```ui4a/tsx\n{COUNTER}```\nA counter.", "times": -1},
           {"when": "picnic", "reply": f"```a2ui\n{RSVP}```\nYour invitation.", "times": -1},
           {"reply": ANSWER, "times": -1}],
}
GENUI = "[adapters.L3.genui]\nrepair_rounds = 0\n"


@pytest.fixture
def served(tmp_path):
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp_path, engine.base_url, extra=GENUI) as served:
        yield served


def messages_of(part):
    [ui] = part["uis"]
    return ui["messages"]


def test_chat_completions_carry_metadata_genui(served):
    completion = served.client().chat.completions.create(
        model="L3", messages=[{"role": "user", "content": "book a table"}])
    assert completion.choices[0].message.content == ANSWER  # the text stays as it was
    part = completion.metadata["genui"]
    assert part["valid"] is True and part["attempts"] == 1
    assert messages_of(part) == [json.loads(line) for line in BOOKING.splitlines()]


def test_streamed_chat_ends_with_metadata_genui(served):
    stream = served.client().chat.completions.create(
        model="L3", stream=True, messages=[{"role": "user", "content": "book a table"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["metadata"]["genui"]["valid"] is True


def test_an_invalid_ui_is_reported_invalid(served):
    completion = served.client().chat.completions.create(
        model="L3", messages=[{"role": "user", "content": "a broken one"}])
    part = completion.metadata["genui"]
    assert part["valid"] is False
    assert part["uis"][0]["problems"][0]["where"] == "line 2, column 45"


def test_responses_carry_a_mol_genui_item(served):
    response = served.client().responses.create(model="L3", input="book a table")
    assert response.output_text == ANSWER
    [item] = [i for i in response.output if i.type == "mol.genui"]
    data = item.model_dump()
    assert data["valid"] is True and messages_of(data)[0]["createSurface"]["surfaceId"] == \
        "booking"
    stored = served.client().responses.retrieve(response.id)
    assert [i.type for i in stored.output] == ["message", "mol.genui"]


def test_streamed_responses_announce_the_item(served):
    events = list(served.client().responses.create(model="L3", input="book a table",
                                                   stream=True))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.item.type for e in added] == ["message", "mol.genui"]
    completed = events[-1]
    assert completed.type == "response.completed"
    assert [i.type for i in completed.response.output] == ["message", "mol.genui"]


def test_the_preview_route_needs_the_key(served):
    response = served.client().responses.create(model="L3", input="a counter")
    base = served.url.removesuffix("/v1")
    assert httpx.get(f"{base}/ui/{response.id}").status_code == 401
    page = httpx.get(f"{base}/ui/{response.id}", headers={"Authorization": f"Bearer {KEY}"},
                     timeout=60)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "connect-src 'none'" in page.headers["content-security-policy"]
    assert 'sandbox="allow-scripts"' in page.text and "UI4A TSX module" in page.text
    missing = httpx.get(f"{base}/ui/resp_nothing", headers={"Authorization": f"Bearer {KEY}"})
    assert missing.status_code == 404
    # The page's modules are static files anyone may load; nothing else opens up.
    asset = httpx.get(f"{base}/ui/assets/react.js")
    assert asset.status_code == 200 and asset.headers["access-control-allow-origin"] == "*"
    assert httpx.get(f"{base}/ui/assets/../../v1/models").status_code == 401
    assert httpx.get(f"{base}/ui/assets/nothing.js").status_code == 404


@pytest.mark.browser
@pytest.mark.slow
def test_the_served_preview_renders_in_a_browser(served, tmp_path):
    from mol.genui import toolchain

    from .conftest import browse

    response = served.client().responses.create(model="L3", input="a counter")
    base = served.url.removesuffix("/v1")
    seen = browse(toolchain.find(), tmp_path, f"{base}/ui/{response.id}", "served.png",
                  headers={"Authorization": f"Bearer {KEY}"})
    assert seen["status"] == 200
    [frame] = seen["frames"]
    assert "Tasks done" in frame["text"] and frame["controls"]["button"] == 2
    assert [m for m in seen["console"] if m["type"] == "error"] == [] and not seen["pageErrors"]


@pytest.mark.browser
@pytest.mark.slow
def test_a_v0_9_1_stream_renders_on_its_preview_route(served, tmp_path):
    from mol.genui import toolchain

    from .conftest import browse

    response = served.client().responses.create(model="L3", input="invite me to the picnic")
    [item] = [i.model_dump() for i in response.output if i.type == "mol.genui"]
    assert item["valid"] is True and item["uis"][0]["version"] == "v0.9.1"
    base = served.url.removesuffix("/v1")
    seen = browse(toolchain.find(), tmp_path, f"{base}/ui/{response.id}", "rsvp.png",
                  headers={"Authorization": f"Bearer {KEY}"})
    assert seen["status"] == 200
    text = seen["page"]["text"]
    for expected in ("A2UI stream (v0.9.1)", "Harbour picnic", "I'll be there",
                     "Not this time", "rendered"):
        assert expected in text
    assert seen["page"]["controls"]["button"] == 2
    assert [m for m in seen["console"] if m["type"] == "error"] == [] and not seen["pageErrors"]
