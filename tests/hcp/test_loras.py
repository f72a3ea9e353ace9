"""An adapter's LoRA in the artifact: its hash checked or computed, its versioned engine
name, and the hash in the artifact's digest."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from mol.core.errors import HCPError
from mol.hcp.loader import load_text
from mol.hcp.loras import content_sha256, unversioned, versioned

HCP = """\
schema_version = 2
name = "loras"
[router]
prompt = "Route."
[adapters.L0]
[adapters.L2]
engine_name = "coder"
lora = {lora}
"""


def _load(folder: Path, lora: str):
    return load_text(HCP.format(lora=lora), base_dir=folder, file="a.toml")


def test_a_local_lora_is_hashed_and_served_under_a_versioned_name(tmp_path: Path) -> None:
    (tmp_path / "l2.gguf").write_bytes(b"weights v1")
    artifact = _load(tmp_path, '{ path = "l2.gguf" }')
    sha = hashlib.sha256(b"weights v1").hexdigest()
    assert artifact.doc.adapters["L2"].lora.sha256 == sha
    assert artifact.doc.engine_name("L2") == f"coder@{sha[:12]}"
    assert artifact.doc.engine_name("L0") == "L0"  # no lora: the engine's own name
    assert unversioned(artifact.doc.engine_name("L2")) == "coder"
    before = artifact.digest
    (tmp_path / "l2.gguf").write_bytes(b"weights v2")
    after = _load(tmp_path, '{ path = "l2.gguf" }')
    assert after.digest != before and after.behaviour_digest != artifact.behaviour_digest
    assert after.doc.engine_name("L2") != artifact.doc.engine_name("L2")


def test_a_declared_hash_must_match_the_file(tmp_path: Path) -> None:
    (tmp_path / "l2.gguf").write_bytes(b"weights")
    with pytest.raises(HCPError) as caught:
        _load(tmp_path, f'{{ path = "l2.gguf", sha256 = "{"0" * 64}" }}')
    (issue,) = caught.value.issues
    assert issue.path == "adapters.L2.lora.sha256" and issue.line == 8
    assert hashlib.sha256(b"weights").hexdigest() in issue.message


def test_a_lora_mol_cannot_read_needs_its_hash(tmp_path: Path) -> None:
    with pytest.raises(HCPError) as caught:
        _load(tmp_path, '{ path = "s3://bucket/l2" }')
    (issue,) = caught.value.issues
    assert issue.path == "adapters.L2.lora.path" and "give its sha256" in issue.message
    sha = "ab" * 32
    artifact = _load(tmp_path, f'{{ path = "/on/the/engine/host/l2", sha256 = "{sha}" }}')
    assert artifact.doc.engine_name("L2") == versioned("coder", sha) == "coder@abababababab"


def test_a_folder_hashes_by_its_files_not_its_place(tmp_path: Path) -> None:
    one = tmp_path / "one"
    (one / "sub").mkdir(parents=True)
    (one / "adapter_config.json").write_text("{}")
    (one / "sub" / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    two = tmp_path / "two"
    shutil.copytree(one, two)
    assert content_sha256(one) == content_sha256(two)
    (two / "adapter_config.json").write_text('{"r": 8}')
    assert content_sha256(one) != content_sha256(two)
