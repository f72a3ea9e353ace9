"""Rules that depend on the system prompt (``when_system``) and seeded stochastic rules
(``p``): what lets an eval suite's outcomes depend on an HCP edit, reproducibly."""

import os

import openai
import pytest

from mol.core.errors import UsageError
from mol.runtime.testing import ScriptedEngine, load_script

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PROMPT_SCRIPT = """
[[L2]]
when_system = "newline"
when = "write"
times = -1
reply = "with a newline"

[[L2]]
times = -1
reply = "without"
"""

COIN = """
[[L1]]
p = 0.3
times = -1
reply = "heads"

[[L1]]
times = -1
reply = "tails"
"""


def ask(c: openai.OpenAI, model: str, text: str, system: str | None = None,
        role: str = "system") -> str:
    messages = ([{"role": role, "content": system}] if system is not None else []) + [
        {"role": "user", "content": text}]
    return c.chat.completions.create(model=model, messages=messages).choices[0].message.content


def client(engine: ScriptedEngine) -> openai.OpenAI:
    return openai.OpenAI(base_url=engine.base_url, api_key="x", max_retries=0, timeout=10)


def test_when_system_matches_the_system_and_developer_messages_only():
    with ScriptedEngine.serve(PROMPT_SCRIPT) as engine, client(engine) as c:
        assert ask(c, "L2", "write it", "End files with a newline.") == "with a newline"
        assert ask(c, "L2", "write it", "End files with a newline.", "developer") == \
            "with a newline"
        assert ask(c, "L2", "write it", "Be brief.") == "without"
        assert ask(c, "L2", "write it with a newline") == "without"  # not the user's text
        assert ask(c, "L2", "read it", "newline") == "without"  # `when` still applies


def draws(seed: int, n: int = 40) -> list[str]:
    with ScriptedEngine.serve(COIN, seed=seed) as engine, client(engine) as c:
        return [ask(c, "L1", f"flip {i % 4}") for i in range(n)]


def test_stochastic_rules_are_seeded_and_reproducible():
    first, again, other = draws(7), draws(7), draws(8)
    assert first == again
    assert first != other
    heads = sum(d == "heads" for d in first + other)
    assert 8 <= heads <= 40, heads  # p = 0.3 of 80 draws: about 24
    # identical requests draw anew each time (how many came before is part of the draw)
    assert set(first[::4]) == {"heads", "tails"}


def test_a_draw_depends_on_the_request_not_on_what_else_the_engine_served():
    with ScriptedEngine.serve(COIN, seed=3) as engine, client(engine) as c:
        alone = [ask(c, "L1", "target") for _ in range(6)]
    with ScriptedEngine.serve(COIN, seed=3) as engine, client(engine) as c:
        mixed = []
        for i in range(6):
            ask(c, "L1", f"noise {i}")
            mixed.append(ask(c, "L1", "target"))
    assert alone == mixed


def test_the_models_list_fingerprints_the_script_and_seed():
    def root(script: str, seed: int) -> str:
        with ScriptedEngine.serve(script, seed=seed) as engine, client(engine) as c:
            return c.models.list().data[0].model_extra["root"]

    assert root(COIN, 1) == root(COIN, 1)
    assert root(COIN, 1) != root(COIN, 2)
    assert root(COIN, 1) != root(COIN.replace("0.3", "0.4"), 1)
    assert root(COIN, 1).startswith("scripted:sha256:")


@pytest.mark.parametrize("rule, problem", [
    ('p = 1.5\nreply = "x"', "L1[0].p: expected a probability between 0 and 1, got 1.5"),
    ('p = "often"\nreply = "x"', "L1[0].p"),
    ('when_system = "("\nreply = "x"', "L1[0].when_system: invalid regular expression"),
])
def test_bad_when_system_and_p_are_named(rule, problem):
    with pytest.raises(UsageError, match=problem.replace("(", r"\(").replace("[", r"\[")):
        load_script(f"[[L1]]\n{rule}\n")
