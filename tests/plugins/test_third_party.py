"""The docs' plugin example, installed as a separate package, works end to end."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mol.runtime.testing import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugins.md"


def extract_files(doc: Path, into: Path) -> list[Path]:
    """Write every 'File `path`:' code block of a doc under ``into``."""
    text = doc.read_text()
    written = []
    for name, body in re.findall(r"^File `([^`]+)`:\n\n```\w*\n(.*?)^```", text, re.M | re.S):
        path = into / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        written.append(path)
    return written


def install(package: Path, target: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(package)],
                   check=True, capture_output=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder holding the docs' mol-weather plugin and a broken plugin, both pip-installed."""
    work = tmp_path_factory.mktemp("plugins")
    files = extract_files(DOC, work / "src")
    assert {p.name for p in files} == {"pyproject.toml", "mol_weather.py"}
    target = work / "site"
    install(work / "src" / "mol-weather", target)
    broken = work / "src" / "mol-broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "mol-broken"\nversion = "0.1"\n'
        '[project.entry-points.mol]\nbroken = "mol_broken"\n'
        '[tool.setuptools]\npy-modules = ["mol_broken"]\n')
    (broken / "mol_broken.py").write_text('raise ImportError("this plugin is broken")\n')
    install(broken, target)
    return target


def mol(site: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(site), **(env or {})}
    return subprocess.run(["mol", *args], capture_output=True, text=True, env=environ,
                          timeout=120)


def test_broken_plugin_is_reported_and_the_others_load(site):
    out = mol(site, "plugins", "list")
    assert out.returncode == 1
    assert "weather: forecast" in out.stdout
    assert "FAILED broken: ImportError: this plugin is broken" in out.stdout


def test_strict_mode_makes_a_broken_plugin_fatal(site):
    out = mol(site, "plugins", "list", env={"MOL_STRICT_PLUGINS": "1"})
    assert out.returncode == 1
    assert "plugin 'broken' failed" in out.stderr and "MOL_STRICT_PLUGINS" in out.stderr
    assert "Traceback" not in out.stderr


def write_hcp(folder: Path, url: str) -> Path:
    path = folder / "weather.toml"
    path.write_text(f"""schema_version = 1
name = "weather"
[engine]
api_base = "{url}"
model_prefix = "hosted_vllm/"
max_retries = 0
[router]
prompt = "Route."
[plugins]
load = ["weather"]
[adapters.L1]
prompt = "You act."
tools.allow = ["forecast"]
""")
    return path


def test_a_turn_calls_the_plugin_tool(site, tmp_path):
    script = """
[[L0]]
constrained = true
times = 2
reply = "L1"
[[L1]]
tool_calls = [{ name = "forecast", arguments = { city = "Lisbon" } }]
[[L1]]
when = "sunny"
reply = "It will be sunny in Lisbon."
[[L1]]
tool_calls = [{ name = "forecast", arguments = { city = "Oslo", days = 9 } }]
[[L1]]
when = "at most 7 days"
reply = "I can only look a week ahead."
[[L0]]
constrained = false
times = -1
reply = "summary"
"""
    with ScriptedEngine.serve(script) as engine:
        hcp = write_hcp(tmp_path, engine.base_url)
        listed = mol(site, "tools", "list", "--hcp", str(hcp), "--adapter", "L1")
        assert "forecast" in listed.stdout and "plugin:weather" in listed.stdout
        first = mol(site, "run", "--hcp", str(hcp), "weather in Lisbon?")
        second = mol(site, "run", "--hcp", str(hcp), "--json", "weather in Oslo in 9 days?")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "It will be sunny in Lisbon.\n"
    events = [json.loads(line) for line in second.stdout.splitlines()]
    blocked = next(e for e in events if e["type"] == "tool_result")
    assert blocked["is_error"] and "at most 7 days ahead" in blocked["content"]
    tools = engine.requests_for("L1")[0]["body"]["tools"]
    assert tools[0]["function"]["parameters"]["properties"]["unit"]["enum"] == ["C", "F"]
    assert "the city's name" in json.dumps(tools)
