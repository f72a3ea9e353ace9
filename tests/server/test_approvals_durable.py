"""Approvals outlast ``mol serve``: a turn waiting for a person is stored, not held in memory.
``mol serve`` SIGKILLed while turns wait, restarted: an answer completes its turn, and the
turn nobody answers is denied when its wait ends, by the restarted server. Two replicas on
one PostgreSQL store: the approval asked on one is answered through the other. Real
processes, the official ``openai`` client, a real MCP server (stdio) whose tool is the
``ask`` tool, the scripted engine."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, tool_results, transcript_problems
from .processes import Server, until

pytestmark = [pytest.mark.slow]

MCP_SERVER = Path(__file__).parents[1] / "runtime" / "mcp" / "servers" / "scripted_server.py"

WAIT = 45  # the restart and the answer must fit in it on a loaded machine
"""Seconds the MCP server's tools wait for an approval (the server's own default is longer:
the MCP server's key is the one that counts)."""

DURABLE_HCP = HCP.replace('tools.allow = ["shout", "hold"]',
                          'tools.ask = ["mcp__s__echo"]\nmcp_servers = ["s"]').replace(
    "expose_adapters = true", "expose_adapters = true\napproval_timeout_sec = 3600") + f"""
[mcp_servers.s]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(MCP_SERVER))}, "--legacy"]
startup_timeout_sec = 60
approval_timeout_sec = {WAIT}
"""

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "summary"

[[L1]]
when = "^echo "
times = -1
tool_calls = [{ name = "mcp__s__echo", arguments = { text = "hi there" } }]
[[L1]]
when = "^hi there$"
times = -1
reply = "Echoed."
[[L1]]
when = "was not run"
times = -1
reply = "Not echoed."
[[L1]]
times = -1
reply = "Anything else?"
"""


def write(tmp: Path, store: str) -> Path:
    """The artifact, its SQLite store at the path ``store``."""
    path = tmp / "durable.toml"
    path.write_text(DURABLE_HCP.format(store=store))
    return path


def ask(server: Server, text: str):
    """The response asking for an approval, and its request."""
    response = server.client.responses.create(model="mol", input=text)
    [request] = [i for i in response.output if i.type == "mcp_approval_request"]
    return response, request


def approve(server: Server, response, request):
    return server.client.responses.create(model="mol", previous_response_id=response.id, input=[
        {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}])


def test_waits_survive_sigkill_answered_or_denied_by_the_restarted_server(tmp_path):
    hcp = write(tmp_path, str(tmp_path / "sessions.db"))
    log = tmp_path / "server.log"
    with ScriptedEngine.serve(SCRIPT) as engine:
        server = Server(tmp_path, engine.base_url, log, hcp=hcp)
        answered, request = ask(server, "echo it")
        assert (request.server_label, request.name) == ("s", "mcp__s__echo")
        assert json.loads(request.arguments) == {"text": "hi there"}
        ignored, _ = ask(server, "echo this, and nobody answers")
        asked_at = time.monotonic()
        server.kill()  # SIGKILL: nothing of the two waits is in memory any more

        server = Server(tmp_path, engine.base_url, log, hcp=hcp)
        done = approve(server, answered, request)
        assert done.output_text == "Echoed."
        assert tool_results(engine)[-1] == "hi there"  # the MCP tool ran, after the restart
        # The other wait ends by itself: the restarted server found it in the store.
        until(lambda: any("nobody answered" in r for r in tool_results(engine)), WAIT + 30)
        assert time.monotonic() - asked_at >= WAIT - 1
        assert tool_results(engine)[-1] == ("Error: mcp__s__echo was not run: the user did "
                                            f"not approve it: nobody answered within {WAIT} s.")
        # Its response names the turn's end: the conversation goes on from it.
        until(lambda: _goes_on(server, ignored), 30)
        server.kill()
    assert "was interrupted" not in log.read_text()
    assert transcript_problems(engine.requests) == []


def _goes_on(server: Server, response) -> bool:
    try:
        server.client.responses.create(model="mol", previous_response_id=response.id,
                                       input="and now?")
    except openai.ConflictError:  # the denial's turn is still finishing
        return False
    return True


@pytest.mark.postgres
def test_an_approval_asked_on_one_replica_is_answered_through_the_other(tmp_path,
                                                                        postgres_url):
    hcp = write(tmp_path, "unused")
    env = {"MOL_SESSION_STORE": postgres_url}
    log = tmp_path / "replicas.log"
    with ScriptedEngine.serve(SCRIPT) as engine:
        a = Server(tmp_path, engine.base_url, log, env=env, hcp=hcp, host="replica-a")
        b = Server(tmp_path, engine.base_url, log, env=env, hcp=hcp)
        try:
            response, request = ask(a, "echo across replicas")
            with pytest.raises(openai.ConflictError) as busy:  # held on the other replica too
                b.client.responses.create(model="mol", previous_response_id=response.id,
                                          input="hello?")
            assert busy.value.body["code"] == "conversation_busy"
            assert 1 <= int(busy.value.response.headers["retry-after"]) <= WAIT
            done = approve(b, response, request)
            assert done.output_text == "Echoed."
            assert done.metadata["mol_adapter"] == "L1"
            assert tool_results(engine)[-1] == "hi there"
            after = a.client.responses.create(model="mol", previous_response_id=done.id,
                                              input="thanks")
            assert after.output_text == "Anything else?"
        finally:
            a.kill()
            b.kill()
    assert transcript_problems(engine.requests) == []
