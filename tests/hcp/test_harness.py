"""``mol hcp import --from mol-harness``: a profile folder laid out like the reference MoL
proxy's becomes an artifact that uses its four files byte for byte, through file
references, and ``mol hcp validate`` accepts it; a folder missing a file, or with a
``lora.md`` mol cannot read, is refused naming the file."""

from __future__ import annotations

import tomllib

import pytest

from mol.cli.main import main
from mol.core.errors import HCPError
from mol.hcp.harness import from_harness
from mol.hcp.loader import load

from .conftest import FILES, IDENTITY, ROUTE_TEXT, write_profile


def run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_import_then_validate(tmp_path, capsys):
    folder = write_profile(tmp_path / "profiles")
    out = tmp_path / "artifacts" / "tall.toml"
    out.parent.mkdir()
    code, _, err = run(capsys, "hcp", "import", "--from", "mol-harness", folder, "-o", out)
    assert code == 0 and "mapped: " in err
    doc = tomllib.loads(out.read_text())
    refs = {"router.prompt": doc["router"]["prompt"], "summary.prompt": doc["summary"]["prompt"],
            "router.descriptions": doc["router"]["descriptions"],
            "model.identity": doc["model"]["identity"]}
    assert {key: ref["path"] for key, ref in refs.items()} == {
        "router.prompt": "../profiles/Macaron-V1-Tall/route.md",
        "summary.prompt": "../profiles/Macaron-V1-Tall/summary.md",
        "router.descriptions": "../profiles/Macaron-V1-Tall/lora.md",
        "model.identity": "../profiles/Macaron-V1-Tall/intro.md"}
    text = out.read_text()
    for body in FILES.values():  # nothing of the files' text is in the artifact
        assert all(line not in text for line in body.splitlines() if len(line) > 12)
    assert (doc["router"]["layout"], doc["router"]["quote_turn"]) == ("prefill", False)
    assert (doc["router"]["adapter"], doc["router"]["max_tokens"]) == ("L0", 24)
    assert (doc["router"]["fallback"], doc["router"]["unavailable_fallback"]) == ("L2", "L1")
    assert doc["summary"]["max_tokens"] == 192 and doc["summary"]["input"] == "trace"
    assert doc["adapters"]["L3"]["params"] == {"temperature": 0.0, "max_tokens": 131072}
    assert doc["engine"]["affinity_header"] == "X-SMG-Routing-Key"
    code, valid, _ = run(capsys, "hcp", "validate", out)
    assert code == 0 and "valid (Macaron-V1-Tall)" in valid
    artifact = load(out)
    assert artifact.prompt("router.prompt") == ROUTE_TEXT + "\nmodel_id=\n"
    assert artifact.prompt("model.identity") == IDENTITY + "\n"
    assert artifact.texts["../profiles/Macaron-V1-Tall/lora.md"] == FILES["lora.md"]


def test_the_adapters_engine_names_come_from_lora_md(tmp_path):
    lora = FILES["lora.md"].replace("adapter_name: L1", "adapter_name: living-v2")
    folder = write_profile(tmp_path, "Custom-Model", lora_md=lora)
    imported = from_harness(folder, tmp_path, base="Base-7B")
    doc = imported.artifact.doc
    assert doc.engine_name("L1") == "living-v2" and doc.engine_name("L2") == "L2"
    assert imported.artifact.prompt("model.identity") == "I am Custom-Model, built on Base-7B.\n"


def test_an_unknown_model_without_a_base_is_refused_where_intro_md_needs_it(tmp_path):
    folder = write_profile(tmp_path, "Custom-Model")
    with pytest.raises(HCPError) as caught:
        from_harness(folder, tmp_path)
    assert "model.identity uses {{BASE_MODEL}}" in str(caught.value)


@pytest.mark.parametrize("missing", ["lora.md", "route.md", "intro.md", "summary.md"])
def test_a_missing_file_is_named(tmp_path, capsys, missing):
    folder = write_profile(tmp_path, **{missing.replace(".", "_"): None})
    code, _, err = run(capsys, "hcp", "import", "--from", "mol-harness", folder)
    assert code != 0
    assert f"{folder / missing}: file not found: {missing}" in err


def test_a_lora_md_without_a_description_is_refused_at_its_line(tmp_path):
    lora = FILES["lora.md"].replace("### Description\n\nerrands for the user\n", "")
    folder = write_profile(tmp_path, lora_md=lora)
    with pytest.raises(HCPError) as caught:
        from_harness(folder, tmp_path)
    [issue] = caught.value.issues
    assert (issue.file, issue.line) == (str(folder / "lora.md"), 12)
    assert "## L1 has no '### Description' text" in issue.message


def test_a_descriptions_file_names_the_adapter_without_a_description(tmp_path):
    (tmp_path / "lora.md").write_text("## L0\n\n### Description\n\nchat\n")
    (tmp_path / "a.toml").write_text(
        'schema_version = 2\nname = "a"\n[router]\nprompt = "{{ADAPTER_DESCRIPTIONS}}"\n'
        'descriptions = { path = "lora.md" }\n[adapters.L0]\n[adapters.L1]\n')
    with pytest.raises(HCPError) as caught:
        load(tmp_path / "a.toml")
    assert "adapters.L1.description" in str(caught.value)
    (tmp_path / "a.toml").write_text((tmp_path / "a.toml").read_text().replace(
        "[adapters.L1]\n", '[adapters.L1]\ndescription = "its own"\n'))
    assert load(tmp_path / "a.toml").prompt("router.prompt") == "L0 = chat\nL1 = its own"
