"""The preview page in headless Debian chromium, driven by playwright-core: each valid
example renders (its text and controls are in the DOM), a screenshot is saved, the console
stays clean, and code inside the TSX frame cannot reach the network. The renderer takes
exactly the A2UI versions the checker takes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from mol.genui.a2ui import check_a2ui
from mol.genui.report import Checked
from mol.genui.web import preview_app
from mol.runtime import serving

from .conftest import CHROMIUM, DATA, browse, lines

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _chromium():
    assert Path(CHROMIUM).exists(), "Debian's chromium is needed (./test installs it)"


@contextmanager
def previewing(path: Path) -> Iterator[str]:
    """``mol genui preview FILE --port 0`` running; the URL it announced."""
    process = subprocess.Popen([sys.executable, "-m", "mol.cli", "genui", "preview",
                                str(path), "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("preview at http://127.0.0.1:"), process.stderr.read()
        yield line.split()[2]
    finally:
        process.terminate()
        process.wait(timeout=15)
        process.stdout.close()
        process.stderr.close()


def errors(seen: dict, key: str = "console") -> list[dict]:
    return [m for m in seen[key] if m["type"] == "error"] + \
        [{"type": "pageerror", "text": e} for e in seen["pageErrors"]]


def test_a_tsx_module_renders_in_its_sandboxed_frame(chain, tmp_path):
    with previewing(DATA / "counter.tsx") as url:
        seen = browse(chain, tmp_path, url, "counter.png",
                      click=[{"frame": True, "name": "Complete one"},
                             {"frame": True, "name": "Report"}],
                      fetchFromFrame=url)
    [frame] = seen["frames"]
    assert "Tasks done" in frame["text"] and "0 | completed" in frame["text"]
    assert frame["controls"]["button"] == 2
    assert "1 | completed" in seen["framesAfterClicks"][0]["text"]
    assert "sent: I completed 1 tasks" in seen["afterClicks"]["text"]  # $ui4a/chat reached
    assert errors(seen, "consoleBeforeFetch") == []
    assert seen["frameFetch"].startswith("failed: TypeError")  # connect-src 'none'
    assert any("Content Security Policy" in m["text"] for m in seen["console"])
    assert (tmp_path / "counter.png").stat().st_size > 5000


def test_an_a2ui_stream_renders_through_the_lit_renderer(chain, tmp_path):
    with previewing(DATA / "booking.jsonl") as url:
        seen = browse(chain, tmp_path, url, "booking.png", click=[{"name": "Book a table"}])
    text = seen["page"]["text"]
    for expected in ("Chez Lune", "Your name", "Guests", "Book a table", "rendered"):
        assert expected in text
    assert seen["page"]["controls"]["input"] == 2 and seen["page"]["controls"]["button"] == 1
    assert '"name":"book"' in seen["afterClicks"]["text"]  # the action reached the page
    assert errors(seen) == []
    assert (tmp_path / "booking.png").stat().st_size > 5000


def test_a_v0_9_1_stream_renders_with_its_text_and_buttons(chain, tmp_path):
    with previewing(DATA / "rsvp-v0.9.1.jsonl") as url:
        seen = browse(chain, tmp_path, url, "rsvp.png", click=[{"name": "I'll be there"}])
    text = seen["page"]["text"]
    for expected in ("A2UI stream (v0.9.1): | valid", "Harbour picnic", "Saturday at noon",
                     "I'll be there", "Not this time", "rendered"):
        assert expected in text
    assert seen["page"]["controls"]["button"] == 2
    assert '"name":"rsvp"' in seen["afterClicks"]["text"] and '"coming":true' in seen[
        "afterClicks"]["text"]
    assert errors(seen) == []
    assert (tmp_path / "rsvp.png").stat().st_size > 5000


@pytest.mark.anyio
async def test_the_renderer_takes_exactly_the_versions_the_checker_takes(chain, schemas,
                                                                         tmp_path):
    """Each stream is put on the page as if the checker had passed it: a version the checker
    accepts for the renderer's protocol renders, and one it refuses the renderer refuses."""
    messages = [json.loads(line) for line in
                (DATA / "rsvp-v0.9.1.jsonl").read_text().split("\n") if line]
    rendered = [v for v, protocol in schemas.versions.items() if protocol.rendered]
    assert rendered == ["v0.9", "v0.9.1"]
    verdicts = {}
    for version in [*rendered, "v0.9.2", "0.9"]:
        stream = [{**m, "version": version} for m in messages]
        checked = check_a2ui(lines(*stream), schemas).valid
        forced = Checked("a2ui", lines(*stream), "file", [], stream, version)
        page = await _browse_page(chain, tmp_path, forced, f"{version}.png")
        verdicts[version] = (checked, "| rendered" in page["text"])
        if not verdicts[version][1]:
            assert ("the renderer refused the messages: message 1 /version: Invalid enum value. "
                    f"Expected 'v0.9' | 'v0.9.1', received '{version}'") in page["text"]
    assert verdicts == {"v0.9": (True, True), "v0.9.1": (True, True),
                        "v0.9.2": (False, False), "0.9": (False, False)}


async def _browse_page(chain, tmp_path: Path, ui: Checked, shot: str) -> dict:
    """What chromium shows of the preview page of ``ui``, served here."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    ready, done = anyio.Event(), anyio.Event()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serving.serve(preview_app([ui], "versions"), sockets=[sock],
                                               ready=ready, until=done, log_level="warning"))
        with anyio.fail_after(30):
            await ready.wait()
        try:
            seen = await anyio.to_thread.run_sync(browse, chain, tmp_path, url, shot)
        finally:
            done.set()
    sock.close()
    assert errors(seen) == []
    return seen["page"]


def test_a_v1_stream_is_shown_through_the_same_renderer(chain, tmp_path):
    example = chain.a2ui_schemas() / "v1_0/schemas/catalogs/basic/examples/09_login-form.json"
    path = tmp_path / "login.jsonl"
    path.write_text(lines(*json.loads(example.read_text())["messages"]))
    with previewing(path) as url:
        seen = browse(chain, tmp_path, url, "login.png")
    assert "A2UI stream (v1.0)" in seen["page"]["text"] and "rendered" in seen["page"]["text"]
    assert seen["page"]["controls"]["input"] >= 2 and seen["page"]["controls"]["button"] >= 1
    assert errors(seen) == []


def test_an_invalid_ui_shows_its_problems_instead(chain, tmp_path):
    path = tmp_path / "broken.tsx"
    path.write_text('export default function App() {\n  fetch("/x");\n  return <p/>;\n}\n')
    with previewing(path) as url:
        seen = browse(chain, tmp_path, url, "broken.png")
    assert "invalid" in seen["page"]["text"] and "line 2, column 3" in seen["page"]["text"]
    assert seen["frames"] == [] and errors(seen) == []
