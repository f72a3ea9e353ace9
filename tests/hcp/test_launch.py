"""``mol.hcp.launch``'s parts: a PEFT folder's rank, the engine's address, vLLM's ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mol.core.errors import UsageError
from mol.hcp.launch import LoraSite, address, max_rank, peft_rank


def lora(folder: Path, config: object) -> LoraSite:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return LoraSite(folder.name, f"{folder.name}@{'0' * 12}", folder.name, str(folder), "0" * 64)


def test_the_rank_is_the_largest_of_r_and_rank_pattern(tmp_path):
    assert peft_rank(lora(tmp_path / "a", {"r": 8, "rank_pattern": {"q": 24, "v": 4}}).local) == 24
    assert peft_rank(lora(tmp_path / "b", {"r": 8}).local) == 8


@pytest.mark.parametrize("config", [[8], {"r": "8"}, {"r": True}, {"r": 0}, {}])
def test_a_config_without_a_rank_reads_as_none(tmp_path, config):
    assert peft_rank(lora(tmp_path / "x", config).local) is None


def test_unreadable_json_and_a_missing_folder_read_as_none(tmp_path):
    site = lora(tmp_path / "x", {})
    (tmp_path / "x" / "adapter_config.json").write_text("{r: 8")
    assert peft_rank(site.local) is None
    assert peft_rank(tmp_path / "absent") is None


def test_vllm_ranks_round_up_and_the_largest_is_a_limit(tmp_path):
    sites = [lora(tmp_path / "a", {"r": 8}), lora(tmp_path / "b", {"r": 100})]
    assert max_rank(sites, None, "sglang") == (100, [])
    rank, notes = max_rank(sites, None, "vllm")
    assert rank == 128 and notes == ["LoRA rank 100 rounded up to 128, the next value vLLM's "
                                     "--max-lora-rank accepts"]
    assert max_rank(sites, 320, "vllm") == (320, [])
    with pytest.raises(UsageError, match="exceeds vLLM's largest --max-lora-rank"):
        max_rank(sites, 600, "vllm")


@pytest.mark.parametrize(("api_base", "expected"), [
    ("http://127.0.0.1:8000/v1", ("127.0.0.1", 8000)),
    ("https://gpu-box.internal/v1", ("gpu-box.internal", 443)),
    ("http://[::1]:9000/v1", ("::1", 9000)),
])
def test_the_engine_listens_where_api_base_points(api_base, expected):
    assert address(api_base) == expected


def test_an_api_base_without_host_is_refused():
    with pytest.raises(UsageError, match="names no host"):
        address("unix:///tmp/engine.sock")
