"""The scripted engine behaves like a real Macaron engine where mol depends on it: a reasoning
parser, assistant prefills, an adapter that is not loaded, a context window, cached tokens."""

import os

import httpx
import openai
import pytest

from mol.cli.main import main
from mol.core.errors import UsageError
from mol.runtime.testing import ScriptedEngine

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


def client(engine: ScriptedEngine) -> openai.OpenAI:
    return openai.OpenAI(base_url=engine.base_url, api_key="x", max_retries=0, timeout=10)


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_reasoning_parser_takes_the_reply_for_thinking_unless_thinking_is_off(field):
    script = '[[L0]]\ntimes = -1\nreply = "L2"\n'
    with ScriptedEngine.serve(script, reasoning_parser=field) as engine, client(engine) as c:
        thought = c.chat.completions.create(model="L0", messages=user("route"))
        said = c.chat.completions.create(model="L0", messages=user("route"),
                                         extra_body=NO_THINKING)
    assert thought.choices[0].message.content is None
    assert thought.choices[0].message.model_extra[field] == "L2"
    assert said.choices[0].message.content == "L2" and field not in said.choices[0].message.model_extra
    assert [r["thinking"] for r in engine.requests] == [True, False]


def test_a_rule_reasoning_comes_before_its_reply_streamed_or_not():
    script = '[[L2]]\ntimes = -1\nreasoning = "First I look at the test."\nreply = "Fixed it."\n'
    with ScriptedEngine.serve(script) as engine, client(engine) as c:
        whole = c.chat.completions.create(model="L2", messages=user("fix"))
        chunks = list(c.chat.completions.create(model="L2", messages=user("fix"), stream=True))
        silent = c.chat.completions.create(model="L2", messages=user("fix"), extra_body=NO_THINKING)
    assert whole.choices[0].message.content == "Fixed it."
    assert whole.choices[0].message.model_extra["reasoning_content"] == "First I look at the test."
    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    thoughts = [d.model_extra.get("reasoning_content") for d in deltas]
    assert "".join(t for t in thoughts if t) == "First I look at the test."
    last_thought = max(i for i, t in enumerate(thoughts) if t)
    assert all(not d.content for d in deltas[:last_thought + 1])
    assert "".join(d.content or "" for d in deltas) == "Fixed it."
    assert "reasoning_content" not in silent.choices[0].message.model_extra


def test_a_prefill_is_continued_and_checked_like_vllm():
    script = '[[L0]]\nconstrained = true\nwhen = "file the report"\ntimes = -1\nreply = "L4"\n'
    prefill = [{"role": "user", "content": "file the report\n\nClassify it."},
               {"role": "assistant", "content": "model_id="}]
    choice = {"structured_outputs": {"choice": ["L0", "L4"]}}
    with ScriptedEngine.serve(script) as engine, client(engine) as c:
        out = c.chat.completions.create(model="L0", messages=prefill, extra_body={
            **choice, "continue_final_message": True, "add_generation_prompt": False})
        with pytest.raises(openai.BadRequestError, match="Cannot set both"):
            c.chat.completions.create(model="L0", messages=prefill,
                                      extra_body={**choice, "continue_final_message": True})
        with pytest.raises(openai.BadRequestError, match="needs the last message to be the "
                                                         "assistant message"):
            c.chat.completions.create(model="L0", messages=prefill[:1], extra_body={
                **choice, "continue_final_message": True, "add_generation_prompt": False})
    assert out.choices[0].message.content == "L4"  # the continuation only, as vLLM answers
    assert engine.requests[0]["prefill"] == "model_id="
    assert [r["status"] for r in engine.requests] == [200, 400, 400]


def test_an_adapter_not_loaded_and_a_context_window_answer_in_the_engines_words():
    script = """
[[workspace_agent]]
times = -1
error = { kind = "adapter_not_loaded" }
[[L2]]
times = -1
error = { kind = "context_length", limit = 16 }
"""
    with ScriptedEngine.serve(script) as engine:
        url = engine.base_url + "/chat/completions"
        missing = httpx.post(url, json={"model": "workspace_agent", "messages": user("hi")})
        long = httpx.post(url, json={"model": "L2", "messages": user("a long prompt " * 10),
                                     "max_tokens": 5})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "The model `workspace_agent` does not exist."
    assert long.status_code == 400
    message = long.json()["error"]["message"]
    assert message.startswith("This model's maximum context length is 16 tokens. However, you "
                              "requested ")
    assert "5 in the completion" in message


@pytest.mark.parametrize("error, problem", [
    ('{ kind = "melted" }', "error.kind: expected one of adapter_not_loaded, context_length"),
    ('{ kind = "adapter_not_loaded", status = 500 }', "sets the status and message itself"),
    ('{ kind = "adapter_not_loaded", limit = 9 }', "limit: expected a positive token count"),
    ('{ status = 500, limit = 9 }', "only a kind = 'context_length' error has a limit"),
])
def test_error_kinds_are_validated(error, problem):
    with pytest.raises(UsageError, match=problem):
        ScriptedEngine(f"[[L2]]\nerror = {error}\n")


def test_a_reasoning_parser_mode_must_name_its_field(tmp_path, capsys):
    with pytest.raises(UsageError, match="reasoning_parser must be one of"):
        ScriptedEngine("[[L0]]\nreply = 'x'\n", reasoning_parser="think")
    script = tmp_path / "s.toml"
    script.write_text("[[L0]]\nreply = 'x'\n")
    with pytest.raises(SystemExit) as caught:
        main(["engine", "scripted", "--script", str(script), "--reasoning-parser", "think"])
    assert caught.value.code == 2 and "--reasoning-parser" in capsys.readouterr().err
