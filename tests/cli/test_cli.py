"""The CLI's contract: fast help without heavy imports, version, exit codes."""

import json
import subprocess
import sys

import pytest

from mol.cli.main import COMMANDS, main
from mol.core import __version__

HEAVY = ("litellm", "mcp", "docker", "uvicorn", "starlette", "pydantic")


def test_help_imports_no_heavy_library():
    code = (
        "import sys\n"
        "from mol.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: mol" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_console_script_help_lists_every_command():
    out = subprocess.run(["mol", "--help"], capture_output=True, text=True, check=True).stdout
    for name, command in COMMANDS.items():
        assert name in out and command.help[:30] in out.replace("\n", " ")


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"mol {__version__}"


def test_every_command_has_help(capsys):
    for name in COMMANDS:
        with pytest.raises(SystemExit) as info:
            main([name, "--help"])
        assert info.value.code == 0, name
        assert f"usage: mol {name}" in capsys.readouterr().out


def test_unknown_command_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_digest_command_prints_only_the_digest(capsys):
    from pathlib import Path

    venti = Path(__file__).resolve().parents[2] / "hcp" / "examples" / "venti.toml"
    assert main(["hcp", "digest", str(venti)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("sha256:") and len(out) == 71


def test_internal_errors_have_no_traceback_but_a_hint(monkeypatch, capsys):
    from mol.cli.commands import hcp

    def boom(args):
        raise RuntimeError("kaput")

    monkeypatch.setattr(hcp, "schema", boom)
    assert main(["hcp", "schema"]) == 1
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: kaput" in err and "MOL_DEBUG=1" in err
    assert "Traceback" not in err
    json.dumps(err)  # plain text


def test_an_adapter_option_names_one_the_artifact_declares(minimal_hcp, capsys):
    hcp = minimal_hcp()
    assert main(["tools", "list", "--hcp", str(hcp), "--adapter", "L7"]) == 2
    err = capsys.readouterr().err
    assert "--adapter 'L7': the artifact 'test' declares L0, L1, L2, L3" in err
    assert main(["skills", "list", "--hcp", str(hcp), "--adapter", "l2"]) == 2
    assert "did you mean 'L2'?" in capsys.readouterr().err
