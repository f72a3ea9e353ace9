"""UI4A TSX modules: esbuild, TypeScript and the forbidden-API walk, each problem located."""

from __future__ import annotations

import pytest

from mol.genui.tsx import check_tsx

from .conftest import DATA

pytestmark = pytest.mark.anyio

APP = "export default function App() {{\n  {body}\n  return <div>ok</div>;\n}}\n"


async def problems(chain, code, first_line=1):
    result = await check_tsx(code, chain, first_line=first_line)
    return [(p.rule, p.where, p.message) for p in result.problems]


async def test_the_sample_module_is_valid_and_compiles_for_the_frame(chain):
    result = await check_tsx((DATA / "counter.tsx").read_text(), chain)
    assert result.valid, result.problems
    assert 'from "$ui4a/ui"' in result.compiled and "createRoot" in result.compiled
    assert "interface CounterProps" not in result.compiled  # types are gone


async def test_a_syntax_error(chain):
    found = await problems(chain, "export default function App() {\n  return <div>{</div>;\n}\n")
    assert found == [("syntax", "line 2, column 17", 'Expected identifier but found "/"')]


async def test_a_type_error_counts_lines_from_the_block(chain):
    code = APP.format(body='const count: number = "three";')
    found = await problems(chain, code, first_line=10)
    assert found == [("type", "line 11, column 9",
                      "TS2322: Type 'string' is not assignable to type 'number'.")]


async def test_wrong_props_of_the_ui_library(chain):
    code = 'import { Button } from "$ui4a/ui";\n' + APP.format(
        body='const b = <Button variant="huge">x</Button>;')
    found = await problems(chain, code)
    assert [(rule, where) for rule, where, _ in found] == [("type", "line 3, column 21")]
    assert '"huge"' in found[0][2]


@pytest.mark.parametrize(("body", "name"), [
    ('fetch("https://example.com/data");', "fetch"),
    ('window.fetch("/x");', "fetch"),
    ('const ws = new WebSocket("wss://x");', "WebSocket"),
    ('const x = new XMLHttpRequest();', "XMLHttpRequest"),
    ('navigator.sendBeacon("/x");', "sendBeacon"),
    ('const f = globalThis["fetch"];', "fetch"),
])
async def test_network_apis_are_refused(chain, body, name):
    found = await problems(chain, APP.format(body=body))
    forbidden = [f for f in found if f[0] == "forbidden"]
    assert len(forbidden) == 1, found
    assert forbidden[0][1].startswith("line 2, column ") and name in forbidden[0][2]


async def test_a_local_name_that_shadows_fetch_is_fine(chain):
    code = APP.format(body='const fetch = (u: string) => u.length; fetch("a");')
    assert await problems(chain, code) == []


@pytest.mark.parametrize(("body", "words"), [
    ('eval("1 + 1");', "eval"),
    ('const f = new Function("return 1");', "Function constructor"),
    ('import("./other");', "dynamic import()"),
])
async def test_code_from_strings_and_dynamic_imports_are_refused(chain, body, words):
    found = await problems(chain, APP.format(body=body))
    assert [rule for rule, _, _ in found] == ["forbidden"]
    assert words in found[0][2] and found[0][1].startswith("line 2, column ")


async def test_imports_outside_the_allowed_set(chain):
    code = 'import _ from "lodash";\nimport { x } from "./local";\n' + APP.format(body="")
    found = await problems(chain, code)
    assert [(rule, where) for rule, where, _ in found] == [("import", "line 1, column 15"),
                                                           ("import", "line 2, column 19")]
    assert "$ui4a/ui" in found[0][2]  # the message lists what may be imported


async def test_a_default_export_is_required(chain):
    found = await problems(chain, "export function App() {\n  return <div/>;\n}\n")
    assert [rule for rule, _, _ in found] == ["export"]
