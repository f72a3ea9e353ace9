"""Checking files and answers: the A2UI blocks of an answer form one stream, TSX blocks are
checked one by one, and the shipped examples (the skill's references) pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.core.errors import UsageError
from mol.genui.checker import check_blocks, check_file
from mol.genui.extract import blocks

from .conftest import DATA, components, create, lines

pytestmark = pytest.mark.anyio
SKILL = Path(__file__).parents[2] / "skills" / "ui4a-genui" / "references"


@pytest.mark.genui
@pytest.mark.parametrize("name", ["example.tsx", "example.a2ui.jsonl"])
async def test_the_skill_examples_pass_the_checks_they_describe(name):
    [checked] = await check_file(SKILL / name)
    assert checked.valid, checked.problems


@pytest.mark.genui
async def test_an_answer_with_both_kinds(tmp_path):
    answer = (f"Two views.\n```a2ui\n{lines(create())}```\nthen\n```ui4a/tsx\n"
              f"{(DATA / 'counter.tsx').read_text()}```\nand\n```a2ui\n"
              f"{lines(components({'id': 'root', 'component': 'Text', 'text': 'x'}))}```\n")
    checked = await check_blocks(blocks(answer))
    assert [(c.kind, c.valid) for c in checked] == [("a2ui", True), ("tsx", True)]
    assert len(checked[0].messages) == 2  # the two A2UI blocks are one stream


@pytest.mark.genui
async def test_problems_are_located_in_the_answer(tmp_path):
    path = tmp_path / "answer.md"
    path.write_text("Intro line\n\n```a2ui\n" + lines(create()) +
                    '{"version": "v0.9", "updateComponents": {"surfaceId": "s", '
                    '"components": [{"id": "root", "component": "Nope"}]}}\n```\n')
    [checked] = await check_file(path)
    assert [str(p) for p in checked.problems] == [
        "line 5 /updateComponents/components/0/component: unknown component type 'Nope'; "
        "the catalog https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json has "
        "AudioPlayer, Button, Card, CheckBox, ChoicePicker, Column, DateTimeInput, Divider, "
        "Icon, Image, List, Modal, Row, Slider, Tabs, Text, TextField, Video"]


async def test_a_file_without_ui(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("just words\n")
    with pytest.raises(UsageError, match="no UI in it"):
        await check_file(path)
    with pytest.raises(UsageError, match="cannot read it"):
        await check_file(tmp_path / "missing.tsx")
