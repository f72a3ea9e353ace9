"""The artifact digest: same meaning, same digest; any byte of any referenced file changes it."""

import re
import tomllib

import tomli_w

from mol.hcp.loader import load


def test_digest_shape(venti):
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", load(venti).digest)


def test_reordering_reformatting_and_comments_keep_the_digest(venti):
    before = load(venti).digest
    doc = tomllib.loads(venti.read_text())
    reordered = dict(reversed(list(doc.items())))
    for key, value in reordered.items():
        if isinstance(value, dict):
            reordered[key] = dict(reversed(list(value.items())))
    text = "# a comment\n\n" + tomli_w.dumps(reordered).replace(" = ", "   =   ")
    venti.write_text(text + "\n# trailing comment\n")
    assert load(venti).digest == before


def test_omitting_a_value_equal_to_the_default_keeps_the_digest(venti):
    text = venti.read_text()
    assert "max_retries = 2\n" in text  # written explicitly, equal to the default
    before = load(venti).digest
    venti.write_text(text.replace("max_retries = 2\n", ""))
    assert load(venti).digest == before


def test_one_byte_of_a_prompt_file_changes_the_digest(venti):
    before = load(venti).digest
    prompt = venti.parent / "prompts" / "coding.md"
    data = bytearray(prompt.read_bytes())
    data[10] ^= 1
    prompt.write_bytes(bytes(data))
    assert load(venti).digest != before


def test_a_skill_file_changes_the_digest(venti):
    skill = venti.parent / "myskills" / "demo"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: demo\ndescription: A demo.\n---\nBody.\n")
    venti.write_text(venti.read_text() + '\n[skills]\npaths = ["myskills"]\n')
    before = load(venti).digest
    (skill / "SKILL.md").write_text("---\nname: demo\ndescription: A demo.\n---\nBody!\n")
    assert load(venti).digest != before


def test_renaming_a_prompt_file_keeps_the_digest(venti):
    before = load(venti).digest
    (venti.parent / "prompts" / "genui.md").rename(venti.parent / "prompts" / "ui.md")
    venti.write_text(venti.read_text().replace("prompts/genui.md", "prompts/ui.md"))
    assert load(venti).digest == before


def test_a_meaningful_edit_changes_the_digest(venti):
    before = load(venti).digest
    venti.write_text(venti.read_text().replace("temperature = 0.2", "temperature = 0.25"))
    assert load(venti).digest != before


def test_hook_script_bytes_enter_the_digest(venti):
    (venti.parent / "hooks").mkdir()
    script = venti.parent / "hooks" / "guard.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    venti.write_text(venti.read_text() + '\n[[hooks.PreToolUse]]\nmatcher = "terminal"\n'
                     'hooks = [{ command = "sh hooks/guard.sh" }]\n')
    before = load(venti).digest
    script.write_text("#!/bin/sh\nexit 2\n")
    assert load(venti).digest != before
