"""``mol engine command``: the vLLM and SGLang launch commands of a venti-shaped artifact with
a fifth adapter (golden lines), and ``--check`` of the files they name."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.hcp.loras import content_sha256

EXAMPLES = Path(__file__).resolve().parents[2] / "hcp" / "examples"
RANKS = {"L0": {"r": 8}, "L1": {"r": 16}, "L2": {"r": 16}, "L3": {"r": 16},
         "L4": {"r": 32, "rank_pattern": {"q_proj": 48}}}
"""Each LoRA's adapter_config.json rank fields: L4's largest rank (48) is a per-module one."""

VLLM = (
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve {root}/GLM-5.2 "
    "--served-model-name GLM-5.2 --host 127.0.0.1 --port 8000 --enable-lora "
    "--lora-modules L0@{L0}={root}/loras/L0 L1@{L1}={root}/loras/L1 L2@{L2}={root}/loras/L2 "
    "L3@{L3}={root}/loras/L3 L4@{L4}={root}/loras/L4 --max-loras 5 --max-lora-rank 64 "
    "--reasoning-parser glm45 --tool-call-parser glm47 --enable-auto-tool-choice "
    "--tensor-parallel-size 8\n"
)
SGLANG = (
    "python -m sglang.launch_server --model-path {root}/GLM-5.2 --served-model-name GLM-5.2 "
    "--host 127.0.0.1 --port 8000 --enable-lora "
    "--lora-paths L0@{L0}={root}/loras/L0 L1@{L1}={root}/loras/L1 L2@{L2}={root}/loras/L2 "
    "L3@{L3}={root}/loras/L3 L4@{L4}={root}/loras/L4 --max-loras-per-batch 5 "
    "--max-lora-rank 48 --reasoning-parser glm45 --tool-call-parser glm47 "
    "--tensor-parallel-size 8\n"
)


def make_lora(folder: Path, config: dict) -> str:
    """A PEFT LoRA folder (adapter_config.json with its rank, fake weights); its sha256."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", **config}))
    (folder / "adapter_model.safetensors").write_bytes(folder.name.encode() * 64)
    return content_sha256(folder)


@pytest.fixture
def site(tmp_path: Path) -> dict:
    """The engine's machine (``root``: the base folder GLM-5.2 and loras/L0-L4) and a venti
    artifact in another folder naming those LoRAs by their paths under the root."""
    root = tmp_path / "root"
    (root / "GLM-5.2").mkdir(parents=True)
    (root / "GLM-5.2" / "config.json").write_text("{}")
    hashes = {name: make_lora(root / "loras" / name, config) for name, config in RANKS.items()}
    shutil.copytree(EXAMPLES, tmp_path / "art")
    hcp = tmp_path / "art" / "venti.toml"
    text = (hcp.read_text().replace("max_retries = 2\n", 'max_retries = 2\nlora_api = "vllm"\n')
            .replace('tool_call_parser = "glm47" }',  # venti's parsers, and one more argument
                     'tool_call_parser = "glm47", extra_args = ["--tensor-parallel-size", "8"] }'))
    for name, sha in hashes.items():
        lora = f'lora = {{ path = "loras/{name}", sha256 = "{sha}" }}\n'
        if name == "L4":
            text += f'\n[adapters.L4]\ndescription = "research: reading sources"\n{lora}'
        else:
            text = text.replace(f"[adapters.{name}]\n", f"[adapters.{name}]\n{lora}")
    hcp.write_text(text)
    return {"hcp": hcp, "root": root, "sha": hashes,
            "short": {name: sha[:12] for name, sha in hashes.items()}}


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(["engine", "command", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_vllm_command_serves_every_lora_under_its_versioned_name(site, capsys):
    code, out, err = run(capsys, "--hcp", site["hcp"], "--engine", "vllm",
                         "--model-root", site["root"])
    assert code == 0
    assert out == VLLM.format(root=site["root"], **site["short"])
    assert "LoRA rank 48 rounded up to 64" in err


def test_sglang_command_takes_the_rank_as_read(site, capsys):
    code, out, err = run(capsys, "--hcp", site["hcp"], "--engine", "sglang",
                         "--model-root", site["root"])
    assert (code, err) == (0, "")
    assert out == SGLANG.format(root=site["root"], **site["short"])


def test_the_engine_defaults_to_the_artifacts_lora_api(site, capsys):
    code, out, _ = run(capsys, "--hcp", site["hcp"], "--model-root", site["root"])
    assert code == 0 and out == VLLM.format(root=site["root"], **site["short"])


def test_a_rank_mol_cannot_read_counts_as_16_and_says_so(site, capsys):
    hcp = site["hcp"]
    hcp.write_text(hcp.read_text().replace('path = "loras/L0"', 'path = "s3://b/L0"')
                   .replace('path = "loras/L4"', 'path = "loras/L3"'))
    code, out, err = run(capsys, "--hcp", hcp, "--engine", "sglang", "--model-root", site["root"])
    assert code == 0
    assert f"L0@{site['short']['L0']}=s3://b/L0 " in out
    assert "--max-lora-rank 16 " in out
    assert "LoRA rank of L0 not read" in err and "counted as 16" in err


def test_a_max_lora_rank_below_a_loras_rank_is_refused(site, capsys):
    code, out, err = run(capsys, "--hcp", site["hcp"], "--engine", "vllm",
                         "--model-root", site["root"], "--max-lora-rank", "32")
    assert (code, out) == (2, "")
    assert "--max-lora-rank 32 is below L4's LoRA rank 48" in err


def test_check_passes_when_every_file_is_there(site, capsys):
    assert run(capsys, "--hcp", site["hcp"], "--model-root", site["root"], "--check") == (
        0, "ok\n", "")


def test_check_names_a_missing_lora_and_a_wrong_hash(site, capsys):
    root = site["root"]
    shutil.rmtree(root / "loras" / "L4")
    (root / "loras" / "L2" / "adapter_model.safetensors").write_bytes(b"retrained")
    changed = content_sha256(root / "loras" / "L2")
    code, out, _ = run(capsys, "--hcp", site["hcp"], "--model-root", root, "--check")
    assert code == 1
    assert out == (f"L2: sha256 mismatch: artifact says {site['sha']['L2']}, the folder "
                   f"hashes to {changed}\n"
                   f"L4: lora file not found: loras/L4 (looked for {root}/loras/L4)\n")


def test_check_names_a_missing_base_folder_and_a_folder_without_adapter_config(site, capsys):
    root = site["root"]
    shutil.rmtree(root / "GLM-5.2")
    config = root / "loras" / "L1" / "adapter_config.json"
    config.rename(root / "loras" / "L1" / "config.json")  # same files' hash changes too
    code, out, _ = run(capsys, "--hcp", site["hcp"], "--model-root", root, "--check")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"model: base folder not found: GLM-5.2 (looked for {root}/GLM-5.2)"
    assert lines[1] == f"L1: lora folder has no adapter_config.json: {root}/loras/L1"
    assert lines[2].startswith("L1: sha256 mismatch: ")


def test_without_model_root_loras_lie_beside_the_artifact(site, capsys):
    art = site["hcp"].parent
    code, out, err = run(capsys, "--hcp", site["hcp"], "--check")
    assert code == 1
    assert f"L0: lora file not found: loras/L0 (looked for {art}/loras/L0)" in out.splitlines()
    assert "model: GLM-5.2 not checked" in err
    shutil.copytree(site["root"] / "loras", art / "loras")
    assert run(capsys, "--hcp", site["hcp"], "--check")[:2] == (0, "ok\n")
    code, out, _ = run(capsys, "--hcp", site["hcp"], "--engine", "vllm")
    assert code == 0
    assert out.startswith("VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve GLM-5.2 ")
    assert f" L0@{site['short']['L0']}={art}/loras/L0 " in out


def test_an_artifact_without_loras_or_base_is_refused(tmp_path, capsys):
    hcp = tmp_path / "a.toml"
    hcp.write_text('schema_version = 2\nname = "a"\n[router]\nprompt = "Route."\n'
                   '[adapters.L0]\ndescription = "all"\n')
    code, _, err = run(capsys, "--hcp", hcp, "--engine", "vllm")
    assert code == 2 and "no adapter of the artifact gives a lora" in err
    code, _, err = run(capsys, "--hcp", hcp)
    assert code == 2 and "give --engine vllm or --engine sglang" in err


@pytest.mark.parametrize(("engine", "keys"), [("vllm", ("name", "path")),
                                              ("sglang", ("lora_name", "lora_path"))])
def test_a_path_the_name_equals_path_form_cannot_carry_goes_as_json(site, capsys, engine, keys):
    root = site["root"]
    (root / "loras" / "L0").rename(root / "loras" / "L0,v=2")
    hcp = site["hcp"]
    hcp.write_text(hcp.read_text().replace('path = "loras/L0"', 'path = "loras/L0,v=2"'))
    code, out, _ = run(capsys, "--hcp", hcp, "--engine", engine, "--model-root", root)
    assert code == 0
    module = json.dumps({keys[0]: f"L0@{site['short']['L0']}", keys[1]: f"{root}/loras/L0,v=2"})
    assert f" {shlex.quote(module)} L1@" in out
    assert shlex.split(out)[shlex.split(out).index(module) - 1] in ("--lora-modules", "--lora-paths")
