"""OAuth 2.1 against a protected MCP server of our own on loopback (``servers/oauth_server.py``):
sign in once (``mol mcp login``), then sessions use the stored tokens; a call that needs a
wider scope signs in again through the call's person (for the union of the scopes), or,
with nobody to ask or a person who declines, fails alone with the reason; no OAuth
configured says 401; the URL guard refuses non-public targets of a public server."""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mol.cli.main import main as mol_main
from mol.core.errors import MCPError
from mol.core.tools import ToolContext
from mol.hcp.loader import load
from mol.runtime.mcp import MCPManager
from mol.runtime.mcp.sdk.oauth import token_path
from mol.runtime.mcp.sdk.urls import check_url, url_guard

from .conftest import SLOW_START, free_port

pytestmark = pytest.mark.anyio
OAUTH_SERVER = Path(__file__).parent / "servers" / "oauth_server.py"


@pytest.fixture
def protected(call_log):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(OAUTH_SERVER), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + SLOW_START
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "no OAuth server"
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.kill()
    proc.wait(10)


def write_hcp(tmp_path: Path, url: str, oauth: bool = True) -> Path:
    path = tmp_path / "mol.toml"
    extra = f"oauth = {{ redirect_port = {free_port()} }}\n" if oauth else ""
    path.write_text(f"""schema_version = 1
name = "oauth"
[router]
prompt = "route"
[adapters.L1]
mcp_servers = ["docs"]
[mcp_servers.docs]
url = "{url}"
startup_timeout_sec = 30
{extra}""")
    return path


async def browse(url: str) -> None:
    """A headless browser: the authorization server signs in at once and redirects back."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as client:
        await client.get(url)


async def test_sign_in_once_then_sessions_use_the_stored_tokens(protected, tmp_path, monkeypatch,
                                                                call_log):
    monkeypatch.setenv("MOL_STATE_DIR", str(tmp_path / "state"))
    hcp = load(write_hcp(tmp_path, protected))
    async with MCPManager(hcp) as mcp:  # headless, not signed in: says what to do
        await mcp.wait_ready()
        [status] = mcp.status()
    assert status.state == "failed" and "run 'mol mcp login docs'" in status.error
    async with MCPManager(hcp, sign_in=browse) as mcp:  # what ``mol mcp login`` runs
        await mcp.wait_ready()
    tokens = token_path("docs", protected)
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    async with MCPManager(hcp) as mcp:  # a later session: no browser, the stored tokens
        echoed = await mcp.call("L1", "mcp__docs__echo", {"text": "signed in"})
    assert echoed.content == "signed in"
    log = call_log.read_text()
    assert log.count("oauth authorize") == 1 and "oauth token authorization_code" in log
    assert "http POST authorized" in log


class Person:
    """The person of a tool call: answers a URL-mode request by opening the URL (a headless
    browser the authorization server redirects back to mol), or declines it."""

    def __init__(self, accept: bool = True) -> None:
        self.accept = accept
        self.asked: list[dict] = []

    async def __call__(self, server: str, request: dict) -> dict:
        self.asked.append(request)
        if not self.accept:
            return {"action": "decline"}
        await browse(request["url"])
        return {"action": "accept"}


async def signed_in(hcp) -> None:
    async with MCPManager(hcp, sign_in=browse) as mcp:  # what ``mol mcp login`` runs
        await mcp.wait_ready()


async def test_a_call_needing_a_wider_scope_signs_in_again_through_its_person(
        protected, tmp_path, monkeypatch, call_log, caplog):
    """403 insufficient_scope: the person is sent to the authorization URL for the union of
    the scopes held and challenged, then the call is retried once and succeeds; the stored
    token keeps the wider scope for the next session."""
    monkeypatch.setenv("MOL_STATE_DIR", str(tmp_path / "state"))
    hcp = load(write_hcp(tmp_path, protected))
    await signed_in(hcp)
    person = Person()
    async with MCPManager(hcp) as mcp:
        added = await mcp.call("L1", "mcp__docs__add", {"a": 2, "b": 3},
                               ToolContext(adapter="L1", elicit=person))
    assert (added.is_error, added.content) == (False, "5")
    [asked] = person.asked
    assert asked["mode"] == "url" and "/authorize?" in asked["url"]
    assert "MCP server 'docs'" in asked["message"] and "'tools write'" in asked["message"]
    log = call_log.read_text().splitlines()
    authorized = [line for line in log if "oauth authorize" in line]
    assert [line.split("oauth authorize ")[1] for line in authorized] == [
        "scope=tools", "scope=tools write"]
    assert sum("insufficient scope" in line for line in log) == 1  # one 403, one retry
    async with MCPManager(hcp) as mcp:  # the wider token is kept: nobody is asked again
        again = await mcp.call("L1", "mcp__docs__add", {"a": 1, "b": 1})
    assert again.content == "2"
    assert "OAuth flow error" not in caplog.text


@pytest.mark.parametrize("person", [None, Person(accept=False)], ids=["nobody", "declines"])
async def test_a_step_up_nobody_gives_fails_that_call_alone(protected, tmp_path, monkeypatch,
                                                            call_log, caplog, person):
    """Without a person (``mol run``, a server's own start) or when the person declines, the
    call fails saying why and what to do; the connection lives on for the next call."""
    monkeypatch.setenv("MOL_STATE_DIR", str(tmp_path / "state"))
    hcp = load(write_hcp(tmp_path, protected))
    await signed_in(hcp)
    async with MCPManager(hcp) as mcp:
        added = await mcp.call("L1", "mcp__docs__add", {"a": 2, "b": 3},
                               ToolContext(adapter="L1", elicit=person))
        echoed = await mcp.call("L1", "mcp__docs__echo", {"text": "still here"})
        [status] = mcp.status()
    assert added.is_error and "MCP server 'docs': tool 'add' failed: " in added.content
    if person is None:
        assert ("the server asks for more access (scope 'tools write') than mol was granted, "
                "and nobody is here to sign in again: add it to [mcp_servers.docs] "
                "oauth.scopes and run 'mol mcp login docs'") in added.content
    else:
        assert ("MCP server 'docs' needs a sign-in for the scope 'tools write'; the person "
                "answered 'decline'") in added.content
        assert len(person.asked) == 1
    assert (echoed.is_error, echoed.content) == (False, "still here")
    assert status.state == "ready"
    assert sum("oauth authorize" in line for line in call_log.read_text().splitlines()) == 1
    assert "Traceback" not in caplog.text and "OAuth flow error" not in caplog.text


def test_mol_mcp_login_prints_the_url_and_keeps_the_tokens(protected, tmp_path, monkeypatch,
                                                          capsys):
    monkeypatch.setenv("MOL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr("webbrowser.open", lambda url: httpx.get(url, follow_redirects=True))
    code = mol_main(["mcp", "login", "--hcp", str(write_hcp(tmp_path, protected)), "docs"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Open this URL to sign in to docs:" in err and "/authorize?" in err
    assert "signed in to docs" in out and token_path("docs", protected).exists()


async def test_a_401_without_oauth_configured_says_so(protected, tmp_path):
    async with MCPManager(load(write_hcp(tmp_path, protected, oauth=False))) as mcp:
        await mcp.wait_ready()
        [status] = mcp.status()
    assert status.state == "failed"
    assert "requires authorization (HTTP 401)" in status.error and "oauth" in status.error


async def test_a_public_server_cannot_send_mol_to_private_or_loopback_urls():
    guard = url_guard("https://93.184.216.34/mcp")  # a public address (nothing is sent to it)
    for target in ("http://127.0.0.1:9/token", "http://10.0.0.1/.well-known/x",
                   "http://169.254.169.254/latest", "http://[::1]/register"):
        with pytest.raises(MCPError, match="not a public address"):
            await guard(httpx.Request("GET", target))
    with pytest.raises(MCPError, match="not an http"):
        await check_url("file:///etc/passwd")
    await url_guard("http://127.0.0.1:5/mcp")(httpx.Request("GET", "http://127.0.0.1:9/x"))
