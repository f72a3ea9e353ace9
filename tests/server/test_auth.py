"""The auth matrix: every route, method and path variant needs the key; /health does not."""

from __future__ import annotations

import json
import os
import subprocess

import httpx
import pytest

from mol.core.errors import ServerError
from mol.runtime.testing import ScriptedEngine
from mol.server.http.auth import check_bind, load_key

from .conftest import KEY, serve_app, write_hcp

SCRIPT = """
[[L0]]
times = -1
reply = "L0"
"""

PATHS = ["/v1/models", "/v1/models/", "/v1/chat/completions", "/v1/chat/completions/",
         "/v1/responses", "/v1/responses/resp_x", "/v1/messages", "/v1/messages/count_tokens",
         "/v1//models", "/v1/unknown", "/", "/health/", "/HEALTH", "/v1/health",
         "/health/../v1/models"]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
BAD_HEADERS = [
    {},
    {"Authorization": f"Bearer {KEY}x"},
    {"Authorization": "Bearer"},
    {"Authorization": ""},
    {"Authorization": f"Basic {KEY}"},
    {"Authorization": KEY},
    {"Authorization": f"Bearer {KEY[:-1]}"},
    {"x-api-key": f"{KEY}x"},
    {"x-api-key": ""},
    {"x-api-key": f"Bearer {KEY}"},
    {"x-api-key": KEY[:-1], "Authorization": f"Bearer {KEY[:-1]}"},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auth")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        yield server


def test_every_route_method_and_variant_needs_the_key(served):
    base = served.url.removesuffix("/v1")
    with httpx.Client(base_url=base, timeout=10) as client:
        for path in PATHS:
            for method in METHODS:
                for headers in BAD_HEADERS:
                    answer = client.request(method, path, headers=headers, content=b"{}")
                    assert answer.status_code == 401, (method, path, headers, answer.text)
                    if method != "HEAD":
                        error = answer.json()["error"]
                        assert error["type"] == "authentication_error"
                        assert KEY not in answer.text
                    assert answer.headers["www-authenticate"] == "Bearer"


def test_the_right_key_passes_and_health_is_open(served):
    base = served.url.removesuffix("/v1")
    good = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base, timeout=10) as client:
        assert client.get("/v1/models", headers=good).status_code == 200
        assert client.get("/v1/models", headers={"x-api-key": KEY}).status_code == 200
        assert client.get("/v1/unknown", headers=good).status_code == 404
        assert client.post("/v1/models", headers=good).status_code == 405
        assert client.get("/v1/responses/resp_missing", headers=good).status_code == 404
        health = client.get("/health")
        assert health.status_code == 200 and health.json()["engine"]["ok"] is True


def test_the_key_file_is_required_unless_unauthenticated_mode(tmp_path):
    with pytest.raises(ServerError, match="MOL_API_KEY_FILE"):
        load_key({})
    assert load_key({"MOL_ALLOW_UNAUTHENTICATED": "1"}) is None
    empty = tmp_path / "key"
    empty.write_text("\n")
    with pytest.raises(ServerError, match="the key file is empty"):
        load_key({"MOL_API_KEY_FILE": str(empty)})
    secret = tmp_path / "secret"
    secret.write_text(KEY + "\n")
    assert load_key({"MOL_API_KEY_FILE": str(secret)}) == KEY.encode()
    with pytest.raises(ServerError) as missing:
        load_key({"MOL_API_KEY_FILE": str(tmp_path / "nope")})
    assert "FileNotFoundError" in str(missing.value)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.com"])
def test_unauthenticated_mode_refuses_non_loopback_binds(host):
    with pytest.raises(ServerError, match="loopback addresses only"):
        check_bind(host, None)
    check_bind(host, b"key")  # with a key any address is allowed


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_unauthenticated_mode_allows_loopback(host):
    check_bind(host, None)


def test_mol_serve_refuses_to_start_as_configured(tmp_path):
    hcp = write_hcp(tmp_path)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MOL_API_KEY_FILE", "MOL_ALLOW_UNAUTHENTICATED")}
    run = [*_mol(), "serve", "--hcp", str(hcp), "--port", "0"]
    out = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("error: no API key")
    out = subprocess.run([*run, "--host", "0.0.0.0"], capture_output=True, text=True,
                         env={**env, "MOL_ALLOW_UNAUTHENTICATED": "1"}, timeout=60)
    assert out.returncode == 2 and "refusing to serve without an API key on '0.0.0.0'" in out.stderr
    assert "Traceback" not in out.stderr


def _mol() -> list[str]:
    return ["mol"]


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """A server without a key (``MOL_ALLOW_UNAUTHENTICATED=1``), on loopback."""
    tmp = tmp_path_factory.mktemp("open")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url,
                                                           key=None) as server:
        server.engine = engine
        yield server


CHAT = {"model": "mol", "messages": [{"role": "user", "content": "hello"}]}


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8200", "localhost.evil.example",
                                  "10.0.0.1", "[::2]", ""])
def test_without_a_key_a_foreign_host_is_refused(open_server, host):
    # DNS rebinding: a page of evil.example whose name now points at 127.0.0.1.
    answer = httpx.post(open_server.url + "/chat/completions", json=CHAT,
                        headers={"Host": host}, timeout=10)
    assert answer.status_code == 403, answer.text
    assert "Host" in answer.json()["error"]["message"]


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost.evil.example",
                                    "https://127.0.0.1.evil.example"])
def test_without_a_key_a_foreign_origin_is_refused(open_server, origin):
    answer = httpx.post(open_server.url + "/chat/completions", json=CHAT,
                        headers={"Origin": origin}, timeout=10)
    assert answer.status_code == 403, answer.text
    assert "Origin" in answer.json()["error"]["message"]
    # A page may open a WebSocket to any host (no CORS): the handshake is refused alike.
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url = open_server.url.replace("http://", "ws://") + "/responses"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin=origin, open_timeout=10).close()
    assert refused.value.response.status_code == 403
    assert b"Origin" in refused.value.response.body


def test_without_a_key_a_form_or_text_post_runs_nothing(open_server):
    # A cross-site <form> or fetch(no-cors) can send text/plain without a preflight.
    before = len(open_server.engine.requests)
    for kind in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]:
        headers = {"Content-Type": kind} if kind else {}
        answer = httpx.post(open_server.url + "/chat/completions", timeout=10, headers=headers,
                            content=json.dumps(CHAT).encode())
        assert answer.status_code == 415, (kind, answer.text)
        assert "application/json" in answer.json()["error"]["message"]
    assert len(open_server.engine.requests) == before


def test_without_a_key_local_clients_still_work(open_server):
    port = open_server.url.split(":")[2].split("/")[0]
    for host in [f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "127.0.0.1"]:
        for origin in [None, f"http://localhost:{port}", f"http://127.0.0.1:{port}"]:
            headers = {"Host": host, **({"Origin": origin} if origin else {})}
            answer = httpx.get(open_server.url + "/models", headers=headers, timeout=10)
            assert answer.status_code == 200, (host, origin, answer.text)
    chat = httpx.post(open_server.url + "/chat/completions", json=CHAT, timeout=30,
                      headers={"Content-Type": "application/json; charset=utf-8"})
    assert chat.status_code == 200, chat.text


def test_a_key_file_others_can_read_is_warned_about(tmp_path, caplog):
    secret = tmp_path / "secret"
    secret.write_text(KEY + "\n")
    secret.chmod(0o600)
    assert load_key({"MOL_API_KEY_FILE": str(secret)}) == KEY.encode()
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    for mode in (0o644, 0o640, 0o604):
        caplog.clear()
        secret.chmod(mode)
        assert load_key({"MOL_API_KEY_FILE": str(secret)}) == KEY.encode()
        [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert str(secret) in warning and f"{mode:o}" in warning and "chmod 600" in warning
        assert KEY not in warning
