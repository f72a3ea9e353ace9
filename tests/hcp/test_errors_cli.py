"""Each class of HCP error, through the CLI: exit 2, precise location, no traceback."""

from pathlib import Path

import pytest

from mol.cli.main import main

MINIMAL = 'schema_version = 1\nname = "t"\n[router]\nprompt = "route"\n'


def validate(path: Path, capsys) -> tuple[int, str]:
    code = main(["hcp", "validate", str(path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "a.toml"
    path.write_text(text)
    return path


def test_shipped_examples_validate(capsys):
    examples = Path(__file__).resolve().parents[2] / "hcp" / "examples"
    for name in ("venti", "tall", "local"):
        assert main(["hcp", "validate", str(examples / f"{name}.toml")]) == 0
        out = capsys.readouterr().out
        assert f"valid ({name}) sha256:" in out


def test_toml_syntax_error_names_the_line(tmp_path, capsys):
    path = write(tmp_path, 'schema_version = 1\nname = "t"\n\n[router\nprompt = "x"\n')
    code, err = validate(path, capsys)
    assert code == 2
    assert "a.toml:4: TOML syntax error" in err


def test_unknown_key_suggests_the_closest(tmp_path, capsys):
    path = write(tmp_path, MINIMAL + '[adapters.L2]\ntools.alow = ["terminal"]\n')
    code, err = validate(path, capsys)
    assert code == 2
    assert "a.toml:6: adapters.L2.tools.alow: unknown key (did you mean 'allow'?)" in err


def test_unknown_adapter_lists_the_valid_ones(tmp_path, capsys):
    path = write(tmp_path, MINIMAL + "[adapters.L7]\nmax_steps = 3\n")
    code, err = validate(path, capsys)
    assert code == 2
    assert ("a.toml:5: adapters.L7: unknown key (valid keys: L0, L1, L2, L3; schema_version = 2 "
            "declares any adapters)") in err


def test_wrong_type_names_path_and_value(tmp_path, capsys):
    path = write(tmp_path, MINIMAL + '[adapters.L1]\nmax_steps = "many"\n')
    code, err = validate(path, capsys)
    assert code == 2
    assert "a.toml:6: adapters.L1.max_steps: Input should be a valid integer" in err
    assert "'many'" in err


def test_list_item_path_is_indexed(tmp_path, capsys):
    path = write(tmp_path, MINIMAL + '[adapters.L2]\ntools.allow = ["a", "b", "c", 4]\n')
    code, err = validate(path, capsys)
    assert code == 2
    assert "adapters.L2.tools.allow[3]: Input should be a valid string" in err


def test_missing_referenced_file(tmp_path, capsys):
    path = write(tmp_path, MINIMAL.replace('"route"', '{ path = "prompts/none.md" }'))
    code, err = validate(path, capsys)
    assert code == 2
    assert "a.toml:4: router.prompt.path: file not found: prompts/none.md" in err


def test_missing_hook_script(tmp_path, capsys):
    hook = '[[hooks.PreToolUse]]\nmatcher = "terminal"\nhooks = [{ command = "hooks/guard.py" }]\n'
    code, err = validate(write(tmp_path, MINIMAL + hook), capsys)
    assert code == 2
    assert "hooks.PreToolUse[0].hooks[0].command: file not found: hooks/guard.py" in err


def test_future_schema_version_names_both_versions(tmp_path, capsys):
    code, err = validate(write(tmp_path, MINIMAL.replace("= 1", "= 9")), capsys)
    assert code == 2
    assert "schema_version 9 is newer than this mol understands (it reads up to 2)" in err


def test_missing_schema_version(tmp_path, capsys):
    code, err = validate(write(tmp_path, MINIMAL.replace("schema_version = 1\n", "")), capsys)
    assert code == 2
    assert "schema_version: required key missing" in err


def test_misspelt_schema_version_is_reported_with_the_rest(tmp_path, capsys):
    text = MINIMAL.replace("schema_version", "schema_versoin") + "[engine]\ntimeout_sec = -1\n"
    code, err = validate(write(tmp_path, text), capsys)
    assert code == 2 and "3 problems" in err
    assert "a.toml:1: schema_versoin: unknown key (did you mean 'schema_version'?)" in err
    assert "schema_version: required key missing" in err
    assert "a.toml:6: engine.timeout_sec" in err


def test_all_errors_reported_together(tmp_path, capsys):
    text = (
        'schema_version = 1\nname = "t"\n'
        '[engine]\nmax_retries = "x"\nroutng_constraint = "regex"\n'
        '[router]\nprompt = { path = "missing.md" }\nfallback = "L9"\n'
        '[adapters.L1]\nmcp_servers = ["git"]\n'
        '[mcp_servers.git]\ncommand = "git-mcp"\nurl = "http://127.0.0.1:1/mcp"\n'
    )
    code, err = validate(write(tmp_path, text), capsys)
    assert code == 2
    assert "5 problems" in err
    for expected in ("a.toml:4: engine.max_retries", "a.toml:5: engine.routng_constraint",
                     "did you mean 'routing_constraint'", "a.toml:8: router.fallback",
                     "a.toml:11: mcp_servers.git: give exactly one of 'command'",
                     "a.toml:7: router.prompt.path: file not found"):
        assert expected in err


def test_cross_reference_errors(tmp_path, capsys):
    text = MINIMAL + 'labels = ["L0", "L2"]\nfallback = "L1"\n[adapters.L1]\nmcp_servers = ["gti"]\n'
    text += '[mcp_servers.git]\ncommand = "x"\n'
    code, err = validate(write(tmp_path, text), capsys)
    assert code == 2
    assert "router.fallback: 'L1' is not one of router.labels" in err
    assert "adapters.L1.mcp_servers[0]: names MCP server 'gti'" in err
    assert "did you mean 'git'?" in err


def test_inline_credentials_refused(tmp_path, capsys):
    text = MINIMAL + '[mcp_servers.web]\nurl = "http://127.0.0.1:9/mcp"\n'
    text += 'http_headers = { Authorization = "Bearer sk-live" }\n'
    code, err = validate(write(tmp_path, text), capsys)
    assert code == 2
    assert "use bearer_token_env_var or env_http_headers" in err


@pytest.mark.parametrize("data", [b"\xff\xfe\x00", b"schema_version = 1\n\x00"])
def test_binary_garbage_is_an_error_not_a_crash(tmp_path, capsys, data):
    path = tmp_path / "a.toml"
    path.write_bytes(data)
    code, err = validate(path, capsys)
    assert code == 2
    assert err.startswith("error: ")


def test_unreadable_file(tmp_path, capsys):
    code, err = validate(tmp_path / "nope.toml", capsys)
    assert code == 2
    assert "cannot read file" in err


@pytest.mark.parametrize("lease", ["0.5", "7200", '"soon"'])
def test_a_lease_out_of_range_names_its_key(tmp_path, capsys, lease):
    path = write(tmp_path, MINIMAL + f"[session]\nlease = {lease}\n")
    code, err = validate(path, capsys)
    assert code == 2
    assert "session.lease" in err and "a.toml:6" in err, err
