"""``[evolve]``, evolvable paths and the behaviour digest."""

from pathlib import Path

import pytest

from mol.core.errors import HCPError
from mol.hcp.evolvable import DEFAULT_PATHS, evolvable, pointer, related, segments, within
from mol.hcp.loader import load

from .conftest import hcp_text


def test_pointers_escape_and_match_by_prefix_and_wildcard():
    assert pointer("$skills", "a/b", "x~y") == "/$skills/a~1b/x~0y"
    assert segments("/$skills/a~1b/x~0y") == ["$skills", "a/b", "x~y"]
    assert related("/adapters/L1", "/adapters/L1/prompt")
    assert related("/adapters/L1/prompt", "/adapters/L1")
    assert not related("/adapters/L1", "/adapters/L10")
    assert within("/adapters/*/prompt", "/adapters/L2/prompt")
    assert not within("/adapters/*/prompt", "/adapters/L2/params/temperature")
    with pytest.raises(ValueError, match="must start with '/'"):
        segments("adapters/L1")


@pytest.mark.parametrize("path, refused", [
    ("/adapters/L1/prompt", None),
    ("/adapters/L1/tools/deny", None),
    ("/$skills/git/SKILL.md", None),
    ("/hooks/PreToolUse", None),
    ("/engine/timeout_sec", "/engine/timeout_sec is never evolvable (/engine)"),
    ("/sandbox/memory", "/sandbox/memory is never evolvable (/sandbox)"),
    ("/adapters/L1/engine_name", "never evolvable (/adapters/*/engine_name)"),
    ("/adapters/L1", "/adapters/L1 is never evolvable (/adapters/*/engine_name)"),
    ("/mcp_servers/gh/env", "never evolvable (/mcp_servers/*/env)"),
    ("/adapters/L1/params/temperature", "/adapters/L1/params/temperature is not under "
                                        "[evolve] paths"),
])
def test_what_is_evolvable_by_default(path, refused):
    got = evolvable(path, DEFAULT_PATHS)
    assert got is None if refused is None else refused in got


def test_an_evolve_section_may_not_open_what_is_never_evolvable(tmp_path: Path):
    good = tmp_path / "good.toml"
    good.write_text(hcp_text('[evolve]\npaths = ["/adapters/*/params"]\nmax_cost_increase = 0.2\n'
                             "min_effect = { tasks = 2 }\n"))
    config = load(good).doc.evolve
    assert (config.paths, config.max_cost_increase, config.min_effect.tasks,
            config.min_effect.points) == (["/adapters/*/params"], 0.2, 2, 2.0)
    for paths, problem in ((["/engine"], "covers /engine"), ([""], "covers"),
                           (["adapters"], "is not a JSON Pointer")):
        bad = tmp_path / "bad.toml"
        bad.write_text(hcp_text(f"[evolve]\npaths = {paths!r}\n".replace("'", '"')))
        with pytest.raises(HCPError, match=problem):
            load(bad)


def test_the_behaviour_digest_leaves_out_where_the_engine_and_sessions_are(tmp_path: Path):
    def digests(*sections: str, prompt: str = '"You fix tests."') -> tuple[str, str]:
        path = tmp_path / "mol.toml"
        path.write_text(hcp_text(f"[adapters.L2]\nprompt = {prompt}\n", *sections))
        artifact = load(path)
        return artifact.digest, artifact.behaviour_digest

    base = digests()
    moved = digests('[engine]\napi_base = "http://gpu-box:9000/v1"\napi_key_env = "KEY"\n'
                    '[session]\nstore = "postgresql://db/mol"\n[evolve]\nmax_cost_increase = 0.5\n')
    assert moved[0] != base[0] and moved[1] == base[1]
    (tmp_path / "p.md").write_text("You fix tests.")
    as_file = digests(prompt='{ path = "p.md" }')
    assert as_file[1] == base[1]  # a prompt moved into a file keeps its behaviour
    assert digests('[engine]\ntimeout_sec = 5\n')[1] != base[1]
    assert digests(prompt='"You fix tests quickly."')[1] != base[1]


def test_mol_hcp_digest_prints_either_digest(tmp_path: Path, capsys) -> None:
    from mol.cli.main import main

    path = tmp_path / "mol.toml"
    path.write_text(hcp_text('[engine]\napi_base = "http://10.0.0.9:8000/v1"\n'))
    artifact = load(path)
    assert main(["hcp", "digest", str(path)]) == 0
    assert main(["hcp", "digest", "--behaviour", str(path)]) == 0
    assert capsys.readouterr().out.split() == [artifact.digest, artifact.behaviour_digest]
    assert artifact.digest != artifact.behaviour_digest
