"""The conformance suite's client under test: mol's own MCP client path, one scenario a run.

    python driver.py SERVER_URL      (MCP_CONFORMANCE_SCENARIO names the scenario)

The suite (``@modelcontextprotocol/conformance``) starts a mock server per
scenario and runs this with its URL. The driver declares that server in an
HCP artifact (``[mcp_servers.conformance]``, with ``oauth`` for the auth
scenarios), opens ``MCPManager`` on it, and does what the scenario expects of a
client: list the tools (mol does so at startup), call the scenario's tools
through ``MCPManager.call`` (argument validation included), answer elicitation
with the schema's defaults, sign in with a headless "browser" that follows the
authorization server's redirects to mol's loopback callback. Tokens go to a
fresh state folder. It exits 0 when the session ran, 1 on an error.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx

from mol.hcp.loader import load_text
from mol.runtime.mcp import MCPManager
from mol.runtime.mcp.naming import qualified_name

SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
CONTEXT: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
CALLS = {
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "request-metadata": [("add_numbers", {"a": 5, "b": 3})],
    "http-standard-headers": [("add_numbers", {"a": 5, "b": 3})],
    "sse-retry": [("test_reconnection", {})],
    "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
    "sep-2322-client-request-state": [("test_mrtr_echo_state", {}), ("test_mrtr_unrelated", {}),
                                      ("test_mrtr_no_state", {}), ("test_mrtr_no_result_type", {})],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _toml(value: Any) -> str:
    return json.dumps(value)  # JSON strings, lists and inline tables of strings are TOML too


def artifact_text(url: str) -> str:
    """The HCP: the mock server as ``conformance``, OAuth set up from the scenario."""
    server = [f"url = {_toml(url)}", "startup_timeout_sec = 45", "tool_timeout_sec = 45",
              'sampling = { adapter = "L0", max_tokens = 16 }']
    if SCENARIO.startswith("auth/"):
        oauth = [f"redirect_port = {_free_port()}",
                 'client_metadata_url = "https://conformance-test.local/client-metadata.json"']
        if CONTEXT.get("client_id"):
            oauth.append(f"client_id = {_toml(CONTEXT['client_id'])}")
        if CONTEXT.get("client_secret"):
            os.environ["CONFORMANCE_CLIENT_SECRET"] = CONTEXT["client_secret"]
            oauth.append('client_secret_env_var = "CONFORMANCE_CLIENT_SECRET"')
        if CONTEXT.get("private_key_pem"):
            os.environ["CONFORMANCE_PRIVATE_KEY"] = CONTEXT["private_key_pem"]
            oauth.append('private_key_env_var = "CONFORMANCE_PRIVATE_KEY"')
            oauth.append(f"signing_algorithm = {_toml(CONTEXT.get('signing_algorithm', 'ES256'))}")
        if SCENARIO.startswith("auth/client-credentials"):
            oauth.append('grant = "client_credentials"')
        if CONTEXT.get("idp_token_endpoint"):
            os.environ["CONFORMANCE_ID_TOKEN"] = CONTEXT["idp_id_token"]
            oauth += ['grant = "identity_assertion"', f"issuer = {_toml(issuer_of(url))}",
                      f"idp_token_endpoint = {_toml(CONTEXT['idp_token_endpoint'])}",
                      f"idp_client_id = {_toml(CONTEXT['idp_client_id'])}",
                      'id_token_env_var = "CONFORMANCE_ID_TOKEN"']
        server.append("oauth = { " + ", ".join(oauth) + " }")
    return "\n".join([
        'schema_version = 1', 'name = "conformance"',
        '[engine]', 'api_base = "http://127.0.0.1:9/v1"', 'max_retries = 0',
        '[router]', 'prompt = "route"',
        '[adapters.L1]', 'mcp_servers = ["conformance"]',
        '[mcp_servers.conformance]', *server, ""])


def issuer_of(url: str) -> str:
    """The authorization server of the mock (SEP-990 configures it; the suite does not say
    it, so the driver reads the resource's metadata, as the Python SDK's own client does)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    metadata = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    return httpx.get(metadata, timeout=30).json()["authorization_servers"][0]


async def browse(url: str) -> None:
    """A headless browser: follow the authorization server's redirects to mol's callback."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as client:
        await client.get(url)


async def accept_defaults(server: str, request: dict[str, Any]) -> dict[str, Any]:
    """Accept every elicitation; mol fills in the schema's defaults."""
    if SCENARIO == "sep-2322-client-request-state":
        return {"action": "accept", "content": {"confirmed": True}}
    return {"action": "accept", "content": {}}


def stub_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments filling a schema's required properties with plain values."""
    plain = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": []}
    properties = schema.get("properties") or {}
    return {name: plain.get((properties.get(name) or {}).get("type"), "x")
            for name in schema.get("required") or []}


async def calls(mcp: MCPManager) -> list[tuple[str, dict[str, Any]]]:
    """The (raw tool name, arguments) this scenario calls."""
    server = mcp.servers["conformance"]
    offered = {raw: server.definitions[raw] for raw in server.present if raw in server.definitions}
    if SCENARIO == "http-invalid-tool-headers":
        return [(raw, stub_arguments(d.input_schema)) for raw, d in sorted(offered.items())]
    if SCENARIO == "http-custom-headers":
        return [(c["name"], c.get("arguments") or {}) for c in CONTEXT.get("toolCalls", [])
                if c["name"] in offered]
    if SCENARIO == "json-schema-2020-12-preservation":
        focal = offered["json_schema_2020_12_tool"].input_schema
        return [("json_schema_echo", {"schema": focal})]
    if SCENARIO.startswith("auth/") and offered:
        return [(sorted(offered)[0], {})]
    return CALLS.get(SCENARIO, [])


async def main(url: str) -> int:
    with tempfile.TemporaryDirectory() as state:
        os.environ["MOL_STATE_DIR"] = state
        folder = Path(state)
        (folder / "mol.toml").write_text(artifact_text(url))
        artifact = load_text((folder / "mol.toml").read_text(), base_dir=folder,
                             path=folder / "mol.toml")
        async with MCPManager(artifact, elicit=accept_defaults, sign_in=browse) as mcp:
            await mcp.wait_ready()
            [status] = mcp.status()
            if status.state != "ready":
                print(f"not ready: {status.error}", file=sys.stderr)
                return 1
            for raw, arguments in await calls(mcp):
                result = await mcp.call("L1", qualified_name("conformance", raw), arguments)
                print(f"{raw}: {result.content[:300]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1]))
