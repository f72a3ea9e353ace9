"""Where the UI sits in an answer or in render_ui's arguments."""

from __future__ import annotations

import json

import pytest

from mol.genui.extract import Block, blocks, tool_blocks

from .conftest import components, create, lines


def test_fenced_blocks_with_their_first_line():
    answer = ("Here it is:\n\n```ui4a/tsx\nexport default function A() {}\n```\n"
              "and the surface:\n```a2ui\n{\"version\": \"v0.9\"}\n```\n"
              "```tsx\nnot a ui4a block\n```\n")
    assert blocks(answer) == [Block("tsx", "export default function A() {}", 4),
                              Block("a2ui", '{"version": "v0.9"}', 8)]


def test_longer_fences_and_tilde_fences():
    answer = "````ui4a/tsx\n```inner```\n````\n~~~a2ui/jsonl\n{}\n~~~\n"
    assert [(b.kind, b.text) for b in blocks(answer)] == [("tsx", "```inner```"),
                                                          ("a2ui", "{}")]


def test_a2ui_json_tags():
    answer = 'Sure.\n<a2ui-json>\n[{"version": "v0.9"}]\n</a2ui-json>\nDone.'
    assert blocks(answer) == [Block("a2ui", '\n[{"version": "v0.9"}]\n', 2)]


def test_an_answer_that_is_only_a2ui_messages():
    answer = lines(create(), components({"id": "root", "component": "Text", "text": "x"}))
    assert blocks(answer) == [Block("a2ui", answer, 1)]
    assert blocks('{"note": "just json"}') == []
    assert blocks("plain text") == []


def test_render_ui_arguments():
    assert tool_blocks({"code": "export default 1"}) == [Block("tsx", "export default 1")]
    messages = [create()]
    assert tool_blocks({"a2ui": messages}) == [Block("a2ui", json.dumps(messages[0]))]
    assert tool_blocks({"a2ui": "{}\n"}) == [Block("a2ui", "{}\n")]
    for bad in ({}, {"code": "x", "a2ui": []}, {"code": "  "}, {"a2ui": 5}):
        with pytest.raises(ValueError):
            tool_blocks(bad)
