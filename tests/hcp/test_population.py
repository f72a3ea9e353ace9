"""Schema version 2: adapters as a population, prompt templating at load, the migration from 1."""

from pathlib import Path

import pytest

from mol.cli.main import main
from mol.core.errors import HCPError
from mol.hcp.loader import load

FIVE = """\
schema_version = 2
name = "five"
[model]
name = "Macaron-V1-Venti"
base = "GLM-5.2"
identity = "You are {{MODEL_NAME}}, post-trained on {{BASE_MODEL}}."
[router]
prompt = { path = "route.md" }
layout = "prefill"
[adapters.L0]
description = "general chat"
[adapters.L1]
description = "personal tasks"
[adapters.L2]
description = "code and   terminals"
[adapters.L3]
description = "generated UI"
[adapters.L4]
description = "workspace documents"
engine_name = "workspace_agent"
"""
ROUTE = """Classify the request above.

{{ADAPTER_DESCRIPTIONS}}

Answer one of: {{ROUTE_LABELS}}
model_id=
"""


def write(tmp_path: Path, text: str, route: str = ROUTE) -> Path:
    (tmp_path / "route.md").write_text(route)
    path = tmp_path / "a.toml"
    path.write_text(text)
    return path


def problems(path: Path) -> str:
    with pytest.raises(HCPError) as caught:
        load(path)
    return str(caught.value)


def test_a_fifth_adapter_validates_and_the_prompts_are_rendered_once(tmp_path):
    artifact = load(write(tmp_path, FIVE))
    doc = artifact.doc
    assert doc.adapter_names == ["L0", "L1", "L2", "L3", "L4"] == doc.route_labels
    assert doc.engine_name("L4") == "workspace_agent" and doc.engine_name("L2") == "L2"
    assert artifact.prompt("router.prompt") == (
        "Classify the request above.\n\nL0 = general chat\nL1 = personal tasks\n"
        "L2 = code and terminals\nL3 = generated UI\nL4 = workspace documents\n\n"
        "Answer one of: L0 L1 L2 L3 L4\nmodel_id=\n")
    assert artifact.prompt("model.identity") == (
        "You are Macaron-V1-Venti, post-trained on GLM-5.2.")
    # The defaults of version 2 follow the population.
    assert doc.route_fallback == "L0" and doc.unavailable_fallback == "L0"
    assert doc.summary_adapter("L4") == "L4"
    # Byte-stable: loading again renders the same text; the file itself is not rewritten.
    assert load(tmp_path / "a.toml").prompts == artifact.prompts
    assert "{{ADAPTER_DESCRIPTIONS}}" in (tmp_path / "route.md").read_text()


def test_labels_restrict_the_routable_adapters(tmp_path):
    text = FIVE.replace('layout = "prefill"', 'layout = "prefill"\nlabels = ["L4", "L2"]')
    artifact = load(write(tmp_path, text))
    assert artifact.doc.route_labels == ["L4", "L2"] and artifact.doc.route_fallback == "L4"
    rendered = artifact.prompt("router.prompt")
    assert "L2 = code and terminals\nL4 = workspace documents\n\n" in rendered  # sorted
    assert "L0 =" not in rendered and "one of: L4 L2\n" in rendered


def test_an_unknown_placeholder_in_a_prompt_file_names_that_file_and_line(tmp_path):
    err = problems(write(tmp_path, FIVE, ROUTE.replace("{{ROUTE_LABELS}}", "{{ROUTE_LABEL}}")))
    assert (f"{tmp_path / 'route.md'}:5: router.prompt: unknown placeholder {{{{ROUTE_LABEL}}}} "
            "(did you mean {{ROUTE_LABELS}}?)") in err


def test_an_unknown_placeholder_inline_names_the_artifact_line(tmp_path):
    text = FIVE.replace('identity = "You are {{MODEL_NAME}}', 'identity = "You are {{WHO}}')
    err = problems(write(tmp_path, text))
    assert f"{tmp_path / 'a.toml'}:6: model.identity: unknown placeholder {{{{WHO}}}}" in err
    assert "known: {{ADAPTER_DESCRIPTIONS}}, {{ROUTE_LABELS}}" in err


def test_what_a_placeholder_needs_must_be_there(tmp_path):
    text = FIVE.replace('description = "generated UI"\n', "").replace('base = "GLM-5.2"\n', "")
    err = problems(write(tmp_path, text))
    assert "adapters.L3.description: required: router.prompt uses {{ADAPTER_DESCRIPTIONS}} " \
           "and L3 is routable" in err
    assert "model.base: required: model.identity uses {{BASE_MODEL}}" in err


def test_the_prefill_layout_needs_its_prefill_line(tmp_path):
    err = problems(write(tmp_path, FIVE, ROUTE.replace("model_id=\n", "")))
    assert "router.layout: with layout = 'prefill' the router prompt's last line" in err


def test_every_adapter_a_section_names_must_be_declared(tmp_path):
    text = FIVE.replace('layout = "prefill"', 'layout = "prefill"\nfallback = "L5"\n'
                        'unavailable_fallback = "L9"\nadapter = "router"') + (
        '[summary]\nadapter = "L44"\nskip = ["L0", "Lx"]\n')
    err = problems(write(tmp_path, text))
    assert "router.fallback: names adapter 'L5', which is not declared under [adapters] " \
           "(declared adapters: L0, L1, L2, L3, L4)" in err
    assert "summary.adapter: names adapter 'L44', which is not declared under [adapters] " \
           "(did you mean 'L4'?)" in err
    for where in ("router.unavailable_fallback", "router.adapter", "summary.adapter",
                  "summary.skip[1]"):
        assert f"{where}: names adapter" in err
    assert "summary.skip[0]" not in err


def test_adapter_names_are_checked(tmp_path):
    err = problems(write(tmp_path, FIVE + '[adapters."bad name"]\n'))
    assert "adapters" in err and "bad name" in err and "should match pattern" in err


def test_version_2_declares_its_adapters(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text('schema_version = 2\nname = "t"\n[router]\nprompt = "route"\n')
    assert "adapters: required key missing" in problems(path)


def test_a_version_1_document_migrates_with_its_meaning(minimal_hcp, tmp_path):
    doc = load(minimal_hcp("[adapters.L2]\nmax_steps = 3\n")).doc
    assert doc.schema_version == 2 and doc.adapter_names == ["L0", "L1", "L2", "L3"]
    assert (doc.router.fallback, doc.summary.adapter) == ("L0", "L0")
    assert doc.adapter("L2").max_steps == 3 and doc.adapter("L3").max_steps == 25
    assert load(minimal_hcp('[summary]\nadapter = "L2"\n')).doc.summary.adapter == "L2"
    # Version 1 fell back on L0 whatever the labels: it still has to be one of them.
    path = tmp_path / "labels.toml"
    path.write_text('schema_version = 1\nname = "t"\n[router]\nprompt = "route"\n'
                    'labels = ["L2", "L1"]\n')
    assert "router.fallback: 'L0' is not one of router.labels ['L2', 'L1']" in problems(path)


def test_the_cli_validates_a_population(tmp_path, capsys):
    path = write(tmp_path, FIVE)
    assert main(["hcp", "validate", str(path)]) == 0
    assert "sha256:" in capsys.readouterr().out


@pytest.mark.parametrize("profile, public, base", [
    ("venti", "Macaron-V1-Venti", "GLM-5.2"), ("tall", "Macaron-V1-Tall", "Qwen3.6-35B-A3B")])
def test_the_shipped_macaron_profiles_use_the_whole_stack(profile, public, base):
    examples = Path(__file__).resolve().parents[2] / "hcp" / "examples"
    artifact = load(examples / f"{profile}.toml")
    doc = artifact.doc
    assert (doc.schema_version, doc.model.name, doc.model.base) == (2, public, base)
    assert doc.router.layout == "prefill" and doc.summary.adapter == "answering"
    assert all(doc.adapter(name).description for name in doc.route_labels)
    router = artifact.prompt("router.prompt")
    assert router.rstrip().endswith("model_id=") and "L3 = generative UI" in router
    assert f"You are {public}" in artifact.prompt("model.identity")
    assert base in artifact.prompt("model.identity")
    assert not any("{{" in text for text in artifact.prompts.values())


def test_the_engine_efficiency_settings_are_checked_with_their_lines(tmp_path):
    path = write(tmp_path, 'schema_version = 2\nname = "bad"\n[router]\nprompt = "Route."\n'
                 'speculate = "always"\n[adapters.L0]\n[summary]\nwhen = "lazy"\n'
                 'idle_after = -1\n')
    assert problems(path).splitlines()[1:] == [
        f"  {path}:5: router.speculate: Input should be 'off' or 'sticky', got 'always'",
        f"  {path}:8: summary.when: Input should be 'eager' or 'deferred', got 'lazy'",
        f"  {path}:9: summary.idle_after: Input should be greater than or equal to 0, got -1"]
    path.write_text('schema_version = 2\nname = "ok"\n[router]\nprompt = "Route."\n'
                    'speculate = "sticky"\n[adapters.L0]\n[summary]\nwhen = "deferred"\n')
    doc = load(path).doc
    assert (doc.router.speculate, doc.summary.when, doc.summary.idle_after) == (
        "sticky", "deferred", 60.0)
