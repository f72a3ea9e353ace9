"""The scripted engine over real HTTP: the openai client, litellm, raw httpx and the CLI."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from mol.cli.main import main
from mol.core.errors import ServerError, UsageError
from mol.runtime.scripted.requests import HTTPProblem, grammar_choices
from mol.runtime.testing import ScriptedEngine, load_script

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

DESIGN_EXAMPLE = """
[[L0]]
constrained = true
when = "test"
reply = "L2"

[[L2]]
tool_calls = [{ name = "terminal", arguments = { command = "pytest -q" } }]

[[L2]]
reply = "The tests pass now."
"""
LABELS = ["L0", "L1", "L2", "L3"]
CONSTRAINTS = {
    "structured_outputs": {"structured_outputs": {"choice": LABELS}},
    "structured_outputs.regex": {"structured_outputs": {"regex": "L[0-3]"}},
    "guided_choice": {"guided_choice": LABELS},
    "regex": {"regex": "(L0|L1|L2|L3)"},
    "grammar": {"grammar": 'root ::= "L0" | "L1" | "L2" | "L3"'},
}


def client(engine: ScriptedEngine) -> openai.OpenAI:
    return openai.OpenAI(base_url=engine.base_url, api_key="x", max_retries=0, timeout=10)


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_reply_and_usage_through_openai():
    with ScriptedEngine.serve(DESIGN_EXAMPLE) as engine, client(engine) as c:
        # The script's adapters, then the rest of a Macaron engine's four (served by default)
        assert [m.id for m in c.models.list()] == ["L0", "L2", "L1", "L3"]
        out = c.chat.completions.create(model="L0", messages=user("run the test"),
                                        extra_body=CONSTRAINTS["guided_choice"])
        assert out.choices[0].message.content == "L2"
        assert out.choices[0].finish_reason == "stop"
        usage = out.usage
        assert usage.prompt_tokens > 0 and usage.completion_tokens == 1
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
        assert usage.prompt_tokens_details.cached_tokens == 0
        [record] = engine.requests
        assert (record["adapter"], record["rule"], record["status"]) == ("L0", 0, 200)
        assert record["body"]["messages"] == user("run the test")
        assert record["constraint"] == {"kind": "guided_choice", "choices": LABELS, "regex": None}
        assert [r.where for r in engine.unused_rules()] == ["L2[0]", "L2[1]"]


def test_tool_calls_with_arguments_and_raw_invalid_json():
    script = """
[[L2]]
tool_calls = [{ name = "terminal", arguments = { command = "pytest -q" } },
              { name = "edit_file", arguments = "{not json" }]
"""
    with ScriptedEngine.serve(script) as engine, client(engine) as c:
        out = c.chat.completions.create(model="L2", messages=user("fix it"))
        choice = out.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        calls = choice.message.tool_calls
        assert [call.id for call in calls] == ["chatcmpl-tool-1", "chatcmpl-tool-2"]
        assert [call.function.name for call in calls] == ["terminal", "edit_file"]
        assert json.loads(calls[0].function.arguments) == {"command": "pytest -q"}
        assert calls[1].function.arguments == "{not json"
        assert engine.unused_rules() == []


def test_streaming_reassembles_content_and_tool_calls():
    reply = "The tests pass now, all forty two of them, in under a second."
    script = {"L2": [{"reply": reply},
                     {"tool_calls": [{"name": "terminal", "arguments": {"command": "ls -la /tmp"}},
                                     {"name": "read_file", "arguments": {"path": "a b c.txt"}}]}]}
    with ScriptedEngine.serve(script) as engine, client(engine) as c:
        chunks = list(c.chat.completions.create(model="L2", messages=user("go"), stream=True,
                                                stream_options={"include_usage": True}))
        pieces = [ch.choices[0].delta.content for ch in chunks if ch.choices and ch.choices[0].delta.content]
        assert len(pieces) >= 2 and "".join(pieces) == reply
        assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
        assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 1

        calls: dict[int, dict] = {}
        finish = None
        for ch in c.chat.completions.create(model="L2", messages=user("go on"), stream=True):
            finish = ch.choices[0].finish_reason or finish
            for frag in ch.choices[0].delta.tool_calls or []:
                call = calls.setdefault(frag.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = frag.id or call["id"]
                call["name"] += frag.function.name or ""
                call["arguments"] += frag.function.arguments or ""
        assert finish == "tool_calls"
        assert [c_["name"] for c_ in calls.values()] == ["terminal", "read_file"]
        assert json.loads(calls[1]["arguments"]) == {"path": "a b c.txt"}
        assert calls[0]["id"] == "chatcmpl-tool-1"


@pytest.fixture(scope="module")
def litellm():
    import litellm

    return litellm


@pytest.mark.anyio
# litellm's own models trip these pydantic warnings while streaming; not ours to fix.
@pytest.mark.filterwarnings("ignore:Item .* on TypedDict class:UserWarning")
@pytest.mark.filterwarnings("ignore:Accessing the 'model_computed_fields':DeprecationWarning")
async def test_litellm_reply_tool_calls_streaming_and_constraints(litellm):
    script = DESIGN_EXAMPLE + """
[[L2]]
reply = "Streamed answer in several pieces."
[[L2]]
tool_calls = [{ name = "read_file", arguments = { path = "src/a b.py" } }]
[[L3]]
constrained = true
times = -1
reply = "L3"
"""
    common = {"api_base": None, "api_key": "x", "num_retries": 0}

    async def ask(model, text, **options):
        return await litellm.acompletion(model=model, messages=user(text), **common, **options)

    async with ScriptedEngine.serve(script) as engine:
        common["api_base"] = engine.base_url
        route = await ask("hosted_vllm/L0", "run the tests", extra_body=CONSTRAINTS["structured_outputs"])
        assert route.choices[0].message.content == "L2"
        [call] = (await ask("openai/L2", "go")).choices[0].message.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "terminal", {"command": "pytest -q"})
        assert (await ask("hosted_vllm/L2", "and?")).choices[0].message.content == "The tests pass now."
        chunks = [ch async for ch in await ask("hosted_vllm/L2", "more", stream=True)]
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        assert text == "Streamed answer in several pieces."
        chunks = [ch async for ch in await ask("hosted_vllm/L2", "read", stream=True)]
        [call] = litellm.stream_chunk_builder(chunks).choices[0].message.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "read_file", {"path": "src/a b.py"})
        for kind, fields in CONSTRAINTS.items():
            answer = await ask("hosted_vllm/L3", kind, extra_body=fields)
            assert answer.choices[0].message.content == "L3"
        bodies = [r["body"] for r in engine.requests]
        assert {b["model"] for b in bodies} == {"L0", "L2", "L3"}  # litellm strips the prefixes
        assert bodies[0]["structured_outputs"] == {"choice": LABELS}  # extra_body goes top level
        assert [b["grammar"] for b in bodies if "grammar" in b] == [CONSTRAINTS["grammar"]["grammar"]]
        assert [r.where for r in engine.unused_rules()] == []


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_each_constraint_kind_accepts_an_allowed_reply(kind):
    with ScriptedEngine.serve('[[L0]]\nconstrained = true\nreply = "L3"\n') as engine, client(engine) as c:
        out = c.chat.completions.create(model="L0", messages=user("draw"), extra_body=CONSTRAINTS[kind])
        assert out.choices[0].message.content == "L3"
        assert engine.requests[0]["constraint"]["kind"].startswith(kind)


@pytest.mark.parametrize("kind", CONSTRAINTS)
def test_each_constraint_kind_rejects_a_reply_the_engine_could_not_produce(kind):
    with ScriptedEngine.serve('[[L0]]\nreply = "L7"\n') as engine, client(engine) as c:
        with pytest.raises(openai.BadRequestError) as info:
            c.chat.completions.create(model="L0", messages=user("hm"), extra_body=CONSTRAINTS[kind])
        message = info.value.body["message"]
        assert "L0[0] replies 'L7'" in message
        assert any(allowed in message for allowed in ("'L0', 'L1', 'L2', 'L3'", "(L0|L1|L2|L3)",
                                                      "'L[0-3]'"))
        assert engine.requests[0]["status"] == 400


def test_constrained_request_cannot_get_tool_calls():
    script = '[[L0]]\ntool_calls = [{ name = "t" }]\n'
    with ScriptedEngine.serve(script) as engine, client(engine) as c:
        with pytest.raises(openai.BadRequestError, match="L0\\[0\\] gives tool calls"):
            c.chat.completions.create(model="L0", messages=user("x"), extra_body=CONSTRAINTS["regex"])


def test_when_constrained_and_times_semantics():
    script = """
[[L0]]
constrained = true
reply = "L1"

[[L0]]
when = "(?i)weather"
times = 2
reply = "Sunny."

[[L0]]
constrained = false
times = -1
reply = "No idea."
"""
    with ScriptedEngine.serve(script) as engine, client(engine) as c:

        def ask(text, constrained=False):
            extra = CONSTRAINTS["guided_choice"] if constrained else None
            out = c.chat.completions.create(model="L0", messages=user(text), extra_body=extra)
            return out.choices[0].message.content

        assert [r.where for r in engine.unused_rules()] == ["L0[0]", "L0[1]", "L0[2]"]
        assert ask("Weather?") == "Sunny."  # rule 0 needs a constraint
        assert ask("route this", constrained=True) == "L1"
        with pytest.raises(openai.BadRequestError, match="L0\\[0\\] used 1 of 1 times"):
            ask("route again", constrained=True)  # rule 2 refuses constrained requests
        assert ask("weather again") == "Sunny."
        assert ask("weather, third time") == "No idea."  # rule 1 used up
        assert ask("anything") == ask("still anything") == "No idea."
        assert [r["rule"] for r in engine.requests] == [1, 0, None, 1, 2, 2, 2]
        assert engine.unused_rules() == []


def test_unmatched_request_names_adapter_last_message_and_rules():
    with ScriptedEngine.serve(DESIGN_EXAMPLE) as engine, client(engine) as c:
        with pytest.raises(openai.BadRequestError) as info:
            c.chat.completions.create(model="L0", messages=user("please deploy"))
        message = info.value.body["message"]
        assert "no scripted rule of L0 matches this unconstrained request" in message
        assert "last message (user): 'please deploy'" in message
        assert "L0[0] needs a constrained request" in message
        tool_turn = [{"role": "user", "content": "x"},
                     {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "out"}]}]
        with pytest.raises(openai.BadRequestError, match="last message \\(tool\\): 'out'"):
            c.chat.completions.create(model="L0", messages=tool_turn)
        assert [r["rule"] for r in engine.requests] == [None, None]


def test_provider_prefix_stripped_and_unknown_model_is_404():
    with ScriptedEngine.serve('[[L1]]\nreply = "ok"\n') as engine, client(engine) as c:
        assert c.chat.completions.create(model="hosted_vllm/L1", messages=user("a")).choices
        # vLLM's words for a model it does not serve (a LoRA it never loaded, or unloaded).
        with pytest.raises(openai.NotFoundError, match="The model `L9` does not exist."):
            c.chat.completions.create(model="L9", messages=user("a"))
        assert [r["adapter"] for r in engine.requests_for("L1")] == ["L1"]


def test_served_names_what_is_listed_and_answered():
    """``served`` replaces the default list; a served name without rules gets the
    unmatched-request 400, one not served vLLM's 404; a name added later is served."""
    with ScriptedEngine.serve('[[L1]]\nreply = "ok"\n', served=["L1", "L5"]) as engine, \
            client(engine) as c:
        assert [m.id for m in c.models.list()] == ["L1", "L5"]
        with pytest.raises(openai.BadRequestError, match="no scripted rule of L5"):
            c.chat.completions.create(model="L5", messages=user("a"))
        with pytest.raises(openai.NotFoundError, match="The model `L0` does not exist."):
            c.chat.completions.create(model="L0", messages=user("a"))
        engine.served.append("L0")
        assert [m.id for m in c.models.list()] == ["L1", "L5", "L0"]


def test_scripted_error_delay_and_latency():
    script = """
[[L0]]
error = { status = 503, message = "engine overloaded" }

[[L0]]
delay = 30
reply = "too late"

[[L0]]
reply = "prompt"
"""
    with ScriptedEngine.serve(script, latency=0.2) as engine, client(engine) as c:
        with pytest.raises(openai.InternalServerError) as info:
            c.chat.completions.create(model="L0", messages=user("a"))
        assert info.value.status_code == 503 and info.value.body["message"] == "engine overloaded"
        with pytest.raises(openai.APITimeoutError):
            c.with_options(timeout=0.5).chat.completions.create(model="L0", messages=user("b"))
        started = time.monotonic()
        assert c.chat.completions.create(model="L0", messages=user("c")).choices[0].message.content == "prompt"
        assert time.monotonic() - started >= 0.2  # the engine-wide latency
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 5  # the 30 s delay still pending was cut short
    assert [r["status"] for r in engine.requests] == [503, 200, 200]


def test_a_streamed_answer_waits_for_its_first_chunk_and_routes_for_their_own_latency():
    script = '[[L0]]\nconstrained = true\ntimes = -1\nreply = "L2"\n' \
             '[[L2]]\ntimes = -1\ndelay = 0.3\nreply = "a streamed answer"\n'
    with ScriptedEngine.serve(script, route_latency=0.05) as engine, \
            httpx.Client(timeout=10) as http:
        started = time.monotonic()
        with http.stream("POST", f"{engine.base_url}/chat/completions", json={
                "model": "L2", "messages": user("go"), "stream": True}) as response:
            headers_after = time.monotonic() - started  # vLLM streams at once
            first = next(line for line in response.iter_lines() if '"content": "a' in line)
            first_after = time.monotonic() - started
        assert headers_after < 0.25 <= first_after and first
        started = time.monotonic()
        routed = http.post(f"{engine.base_url}/chat/completions", json={
            "model": "L0", "messages": user("go"), "guided_choice": LABELS})
        assert routed.json()["choices"][0]["message"]["content"] == "L2"
        assert time.monotonic() - started < 0.25  # route_latency, not the answer's
    answer, route = engine.requests
    assert answer["duration"] >= 0.3 and 0.05 <= route["duration"] < 0.25


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_gone_before_its_answer_is_recorded_as_cancelled(stream):
    script = '[[L2]]\ntimes = -1\ndelay = 5\nreply = "too slow"\n'
    with ScriptedEngine.serve(script) as engine, client(engine) as c:
        with pytest.raises(openai.APITimeoutError):
            reply = c.with_options(timeout=0.3).chat.completions.create(
                model="L2", messages=user("go"), stream=stream)
            list(reply) if stream else None
        deadline = time.monotonic() + 3
        while not engine.requests[-1].get("cancelled") and time.monotonic() < deadline:
            time.sleep(0.02)
        [record] = engine.requests
        assert record["cancelled"] is True and record["duration"] < 2


def test_log_file_holds_one_json_line_per_request(tmp_path):
    log = tmp_path / "requests.jsonl"
    with ScriptedEngine.serve(DESIGN_EXAMPLE, log_path=log) as engine, httpx.Client() as http:
        http.post(f"{engine.base_url}/chat/completions",
                  json={"model": "L2", "messages": user("go"), "tools": []})
        http.post(f"{engine.base_url}/chat/completions", content=b"{oops")
        lines = log.read_text().splitlines()  # flushed per line, readable while serving
    first, second = map(json.loads, lines)
    assert first["body"]["messages"] == user("go") and first["body"]["model"] == "L2"
    assert (first["adapter"], first["rule"], first["status"], first["seq"]) == ("L2", 0, 200, 1)
    assert first["usage"]["prompt_tokens"] > 0
    assert (second["body"], second["status"], second["adapter"]) == ("{oops", 400, None)
    assert "not valid JSON" in second["error"]


def test_cached_tokens_follow_the_longest_common_prefix():
    script = '[[L2]]\ntimes = -1\nreply = "ok"\n[[L3]]\nreply = "ok"\n'
    history = [{"role": "system", "content": "You code carefully."}, *user("first question")]
    with ScriptedEngine.serve(script) as engine, client(engine) as c:

        def usage(model, messages):
            u = c.chat.completions.create(model=model, messages=messages).usage
            return u.prompt_tokens, u.prompt_tokens_details.cached_tokens

        p1, c1 = usage("L2", history)
        history += [{"role": "assistant", "content": "ok"}, *user("second question")]
        p2, c2 = usage("L2", history)
        history += [{"role": "assistant", "content": "ok"}, *user("third")]
        p3, c3 = usage("L2", history)
        assert c1 == 0 and p1 - 3 <= c2 < p1 < p2 and p2 - 3 <= c3 < p2 < p3
        assert usage("L2", history) == (p3, p3)  # the same prompt again: all cached
        assert usage("L3", history) == (p3, 0)  # each adapter has its own cache
        other, cached = usage("L2", [{"role": "system", "content": "Something else."}])
        assert 0 < cached <= other - 4  # only the framing up to the system text is shared


@pytest.mark.anyio
async def test_async_use_and_clean_shutdown():
    def portals():
        return [t for t in threading.enumerate() if "portal" in t.name]

    async with ScriptedEngine.serve('[[L0]]\nreply = "hi"\n') as engine:
        assert len(portals()) == 1
        async with httpx.AsyncClient() as http:
            answer = await http.post(f"{engine.base_url}/chat/completions",
                                     json={"model": "L0", "messages": user("x")})
        assert answer.json()["choices"][0]["message"]["content"] == "hi"
    assert portals() == []  # the server thread is joined
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{engine.base_url}/models")


@pytest.mark.parametrize(("body", "message"), [
    (b"[1]", "request body must be a JSON object, got an array"),
    (b'{"messages": []}', "'model' must be a string, got null"),
    (b'{"model": "L0", "messages": []}', "'messages' must be a non-empty array"),
    (b'{"model": "L0", "messages": [{"role": "robot"}]}', "messages[0].role must be one of"),
    (b'{"model": "L0", "messages": [{"role": "user", "content": 3}]}', "messages[0].content must be"),
    (b'{"model": "L0", "messages": [{"role": "user"}], "stream": "yes"}', "'stream' must be a boolean"),
    (b'{"model": "L0", "messages": [{"role": "user"}], "regex": "(", "grammar": "x"}',
     "one routing constraint, got regex, grammar"),
    (b'{"model": "L0", "messages": [{"role": "user"}], "regex": "("}', "not a valid regular expression"),
    (b'{"model": "L0", "messages": [{"role": "user"}], "structured_outputs": {"json": {}}}',
     "must hold exactly one of choice, regex, grammar"),
    (b'{"model": "L0", "messages": [{"role": "user"}], "guided_choice": []}',
     "'guided_choice' must be a non-empty array of strings"),
])
def test_malformed_request_bodies_get_precise_400s(body, message):
    with ScriptedEngine.serve('[[L0]]\nreply = "L0"\n') as engine:
        answer = httpx.post(f"{engine.base_url}/chat/completions", content=body)
    assert answer.status_code == 400
    assert message in answer.json()["error"]["message"]
    assert engine.requests[0]["status"] == 400 and engine.unused_rules() != []


def test_grammar_literals():
    grammar = '# routing\nroot ::= "L0"\n  | "a \\"quoted\\" one" | "tab\\t"\n'
    assert grammar_choices(grammar) == ("L0", 'a "quoted" one', "tab\t")
    with pytest.raises(HTTPProblem, match="only a root rule of quoted literal alternatives"):
        grammar_choices('root ::= label\nlabel ::= "L0"')


@pytest.mark.parametrize(("script", "message"), [
    ("[[L2]]\nreply = 'a'\n[[L2]]\nrepy = 'b'\n", "L2[1]: unknown field 'repy' (did you mean 'reply'?)"),
    ("[[L2]]\nreply = 'a'\ntool_calls = []\n", "L2[0]: needs exactly one of 'reply', 'tool_calls', "
                                               "'error', got reply and tool_calls"),
    ("[[L2]]\nreply = 'a'\ntimes = 0\n", "L2[0].times: expected -1 (no limit) or a positive count, got 0"),
    ("[[L2]]\nreply = 'a'\nwhen = '('\n", "L2[0].when: invalid regular expression '('"),
    ("[[L2]]\nreply = 'a'\nconstrained = 'yes'\n", "L2[0].constrained: expected true or false, got a string"),
    ("[[L2]]\ntool_calls = [{ name = 't', args = {} }]\n", "L2[0].tool_calls[0]: unknown field 'args'"),
    ("[[L2]]\ntool_calls = [{ arguments = 3 }]\n", "L2[0].tool_calls[0].arguments: expected a table or"),
    ("[[L2]]\nerror = { status = 200 }\n", "L2[0].error.status: expected an HTTP error status 400..599"),
    ("[[L2]]\nreply = 'a'\ndelay = -1\n", "L2[0].delay: expected a finite number of seconds >= 0"),
    ("[[L2]]\nreply = 'a'\nusage = { prompt = 3 }\n", "L2[0].usage: unknown field 'prompt'"),
    ("[L2]\nreply = 'a'\n", "L2: expected an array of rules ([[L2]]), got a table"),
    ("[[L2]\n", "script: invalid TOML"),
    ("", "the script names no adapters"),
])
def test_script_validation_names_adapter_rule_and_field(script, message):
    with pytest.raises(UsageError) as info:
        load_script(script)
    assert message in str(info.value)


def test_script_validation_reports_every_problem_and_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[[L0]]\nrepy = 'x'\ntimes = true\n")
    with pytest.raises(UsageError) as info:
        load_script(path)
    text = str(info.value)
    assert text.startswith(f"{path}: 3 problems in the script:")
    assert f"{path}: L0[0].times: expected an integer, got a boolean" in text
    with pytest.raises(UsageError, match="cannot read the script"):
        load_script(tmp_path / "missing.toml")
    assert main(["engine", "scripted", "--script", str(path)]) == 2


def test_busy_port_and_bad_options_are_reported(tmp_path):
    with ScriptedEngine.serve('[[L0]]\nreply = "x"\n') as engine:
        with pytest.raises(ServerError, match=f"cannot listen on 127.0.0.1:{engine.port}"):
            ScriptedEngine('[[L0]]\nreply = "x"\n', port=engine.port).start()
    with pytest.raises(UsageError, match="latency must be a finite number"):
        ScriptedEngine('[[L0]]\nreply = "x"\n', latency=-1)
    script = tmp_path / "ok.toml"
    script.write_text('[[L0]]\nreply = "x"\n')
    assert main(["engine", "scripted", "--script", str(script), "--port", "70000"]) == 2
    assert main(["engine", "scripted", "--script", str(tmp_path / "none.toml")]) == 2


def test_scripted_usage_override():
    script = '[[L0]]\nreply = "x"\nusage = { prompt_tokens = 1000, cached_tokens = 900 }\n'
    with ScriptedEngine.serve(script) as engine, client(engine) as c:
        usage = c.chat.completions.create(model="L0", messages=user("a")).usage
    assert (usage.prompt_tokens, usage.total_tokens) == (1000, 1001)
    assert usage.prompt_tokens_details.cached_tokens == 900


class LineReader:
    """Lines of a subprocess stream, read by a thread so a test can wait with a deadline."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line.decode())

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no line with {needle!r} on stderr; got {''.join(self.seen)!r}")

    def rest(self) -> str:
        self.thread.join(timeout=10)
        return "".join(self.lines.queue)


def test_cli_serves_then_stops_cleanly_on_sigterm(tmp_path: Path):
    script, log = tmp_path / "script.toml", tmp_path / "log.jsonl"
    script.write_text(DESIGN_EXAMPLE)
    command = [sys.executable, "-m", "mol.cli", "engine", "scripted", "--script", str(script),
               "--port", "0", "--log", str(log), "--served", "L0,L2,L4"]
    with subprocess.Popen(command, stderr=subprocess.PIPE) as proc:
        stderr = LineReader(proc.stderr)
        try:
            line = stderr.wait_for("serving L0, L2, L4 at http://127.0.0.1:")
            url = line.split(" at ")[1].split(",")[0].strip()
            listed = httpx.get(f"{url}/models").json()["data"]
            assert [model["id"] for model in listed] == ["L0", "L2", "L4"]
            answer = httpx.post(f"{url}/chat/completions",
                                json={"model": "L2", "messages": user("run")}).json()
            assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "terminal"
            stderr.wait_for("#1 L2[0] -> 200")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            proc.kill()
        rest = stderr.rest()
    assert "SIGTERM, shutting down" in rest and "Traceback" not in rest
    assert json.loads(log.read_text())["adapter"] == "L2"
