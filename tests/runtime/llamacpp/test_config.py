"""The local engine's configuration, CLI arguments and HCP fields (no engine process)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.core.errors import HCPError, LocalEngineError, UsageError
from mol.hcp.loader import load, load_text
from mol.runtime.llamacpp import supervisor as local_engine
from mol.runtime.llamacpp.supervisor import (
    LocalEngineConfig,
    config_from_artifact,
    ensure_local_engine,
    parse_lora,
    server_config,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "hcp" / "examples"
ARTIFACT = """
schema_version = 1
name = "t"
[engine]
kind = "local"
api_base = "{api_base}"
local_model = "models/base.gguf"
local_loras = {{ L2 = "models/coding.gguf" }}
[router]
prompt = "route"
"""


def test_parse_lora_reads_adapter_and_path() -> None:
    assert parse_lora("L1=adapters/agent.gguf") == ("L1", Path("adapters/agent.gguf"))


@pytest.mark.parametrize("spec, message", [
    ("L1", "expected ADAPTER=PATH"),
    ("L1=", "expected ADAPTER=PATH"),
    ("L7=x.gguf", "unknown adapter 'L7'"),
])
def test_parse_lora_names_the_bad_argument(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_lora(spec)


def test_server_config_serves_one_base_as_four_adapters(tmp_path: Path) -> None:
    model, lora = tmp_path / "base.gguf", tmp_path / "l2.gguf"
    model.write_bytes(b"GGUF")
    lora.write_bytes(b"GGUF")
    config = server_config(LocalEngineConfig(model=model, loras={"L2": lora}), port=9123)
    assert (config["host"], config["port"]) == ("127.0.0.1", 9123)
    entries = {entry["model_alias"]: entry for entry in config["models"]}
    assert list(entries) == ["L0", "L1", "L2", "L3"]
    assert {entry["model"] for entry in entries.values()} == {str(model.resolve())}
    assert {name for name, e in entries.items() if e.get("chat_format")} == {"L1", "L2"}
    assert [name for name, e in entries.items() if "lora_path" in e] == ["L2"]
    assert entries["L2"]["lora_path"] == str(lora.resolve())


def test_server_config_refuses_missing_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="model .*missing.gguf.* does not exist"):
        server_config(LocalEngineConfig(model=tmp_path / "missing.gguf"), port=1)
    model = tmp_path / "base.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(UsageError, match="LoRA of L1"):
        server_config(LocalEngineConfig(model=model, loras={"L1": tmp_path / "no"}), port=1)


def test_missing_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(LocalEngineError, match=r"pip install 'mol-agent\[local\]'"):
        local_engine._check_installed()


def test_artifact_fields_resolve_against_the_artifact(tmp_path: Path) -> None:
    artifact = load_text(ARTIFACT.format(api_base="http://127.0.0.1:8099/v1"), base_dir=tmp_path)
    config = config_from_artifact(artifact)
    assert config.port == 8099
    assert config.model == tmp_path / "models" / "base.gguf"
    assert dict(config.loras) == {"L2": tmp_path / "models" / "coding.gguf"}
    with pytest.raises(UsageError, match="loopback only"):
        config_from_artifact(artifact, api_base="http://10.1.2.3:8099/v1")


@pytest.mark.parametrize("api_base", ["http://10.0.0.2:8080/v1", "https://127.0.0.1:8080/v1",
                                      "http://127.0.0.1/v1", "http://127.0.0.1:8080/api"])
def test_local_kind_must_serve_on_loopback(tmp_path: Path, api_base: str) -> None:
    with pytest.raises(HCPError, match="engine: .*loopback only"):
        load_text(ARTIFACT.format(api_base=api_base), base_dir=tmp_path)


def test_local_example_targets_the_local_engine() -> None:
    engine = load(EXAMPLES / "local.toml").doc.engine
    assert (engine.kind, engine.routing_constraint, engine.model_prefix) == (
        "local", "grammar", "openai/")


@pytest.mark.anyio
async def test_remote_artifact_starts_nothing() -> None:
    async with ensure_local_engine(load(EXAMPLES / "venti.toml")) as engine:
        assert engine is None


def test_cli_rejects_a_bad_lora_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "local", "--lora", "L9=x.gguf"]) == 2
    assert "unknown adapter 'L9'" in capsys.readouterr().err


def test_an_artifact_serves_its_own_population(tmp_path: Path) -> None:
    text = """
schema_version = 2
name = "five"
[engine]
kind = "local"
api_base = "http://127.0.0.1:8099/v1"
local_loras = { L4 = "models/ws.gguf" }
[router]
prompt = "route"
[adapters.L0]
[adapters.L4]
engine_name = "workspace_agent"
tools.allow = ["read_file"]
"""
    config = config_from_artifact(load_text(text, base_dir=tmp_path))
    assert config.adapters == ("L0", "workspace_agent")
    assert config.tool_adapters == frozenset({"workspace_agent"})
    assert dict(config.loras) == {"workspace_agent": tmp_path / "models" / "ws.gguf"}
    model = tmp_path / "base.gguf"
    model.write_bytes(b"GGUF")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "ws.gguf").write_bytes(b"GGUF")
    entries = server_config(LocalEngineConfig(model=model, loras=config.loras,
                                              adapters=config.adapters,
                                              tool_adapters=config.tool_adapters), port=1)
    assert [e["model_alias"] for e in entries["models"]] == ["L0", "workspace_agent"]
    assert [e["model_alias"] for e in entries["models"] if e.get("chat_format")] == [
        "workspace_agent"]


LORA_ARTIFACT = """
schema_version = 2
name = "hot"
[engine]
kind = "local"
api_base = "http://127.0.0.1:8099/v1"
{local_loras}
[router]
prompt = "route"
[adapters.L0]
[adapters.L2]
tools.allow = ["read_file"]
lora = {{ path = "{path}" }}
"""


def test_an_adapter_s_lora_is_served_at_start_under_its_versioned_name(tmp_path: Path) -> None:
    """``[adapters.NAME] lora`` on the local engine: the engine starts with the file as the
    adapter's LoRA, under the name mol's requests use (``NAME@<12 hex of its sha256>``)."""
    from mol.hcp.loras import content_sha256, versioned

    (tmp_path / "models").mkdir()
    lora = tmp_path / "models" / "coding.gguf"
    lora.write_bytes(b"GGUF coding v1")
    artifact = load_text(LORA_ARTIFACT.format(local_loras="", path="models/coding.gguf"),
                         base_dir=tmp_path)
    name = versioned("L2", content_sha256(lora))
    assert artifact.doc.engine_name("L2") == name
    config = config_from_artifact(artifact)
    assert config.adapters == ("L0", name)
    assert dict(config.loras) == {name: lora}
    assert config.tool_adapters == frozenset({name})
    model = tmp_path / "base.gguf"
    model.write_bytes(b"GGUF")
    entries = server_config(LocalEngineConfig(model=model, loras=config.loras,
                                              adapters=config.adapters,
                                              tool_adapters=config.tool_adapters), port=1)
    assert {e["model_alias"]: e.get("lora_path") for e in entries["models"]} == {
        "L0": None, name: str(lora)}


@pytest.mark.parametrize("local_loras, path, message", [
    ('local_loras = { L2 = "models/coding.gguf" }', "models/coding.gguf",
     "adapters.L2: give its LoRA once"),
    ("", "s3://bucket/coding.gguf", "adapters.L2.lora.path: the local engine reads LoRA files"),
])
def test_an_adapter_s_lora_the_local_engine_cannot_serve_is_refused(
        tmp_path: Path, local_loras: str, path: str, message: str) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "coding.gguf").write_bytes(b"GGUF coding v1")
    text = LORA_ARTIFACT.format(local_loras=local_loras, path=path)
    if "://" in path:  # mol cannot read a URI: the artifact gives the hash
        text = text.replace(f'path = "{path}"', f'path = "{path}", sha256 = "{"a" * 64}"')
    with pytest.raises(UsageError, match=message):
        config_from_artifact(load_text(text, base_dir=tmp_path))
