"""UI4A TSX modules: checked (and compiled for the preview) by ``node/check.mjs``.

The Node program compiles the module with esbuild, walks its syntax tree for
imports outside the allowed set and for what a sandboxed UI must not do, and
type-checks it with TypeScript against the ``$ui4a/*`` stubs' declarations and
React's types; this module runs it and turns its findings into ``Problem``s
located by line and column of the answer (or of the file).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

import anyio

from mol.core.errors import GenUIError
from mol.genui.report import Checked, Problem
from mol.genui.toolchain import STUBS, Toolchain

CHECK_TIMEOUT = 60.0
"""Seconds one check may take (TypeScript loads React's types each time: ~2 s)."""


async def check_tsx(code: str, chain: Toolchain, *, first_line: int = 1,
                    origin: str = "answer") -> Checked:
    """Check one TSX module; ``first_line`` is where it starts in the answer."""
    raw = await _run(chain, code)
    try:
        found = json.loads(raw)
        problems = [Problem(f"line {first_line + int(p['line']) - 1}, column {int(p['column'])}",
                            str(p["message"]), str(p["rule"])) for p in found["problems"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise GenUIError(f"the TSX checker answered something mol cannot read: {exc}") from None
    result = Checked("tsx", code, origin, problems)
    result.compiled = found.get("compiled")
    return result


RECENT = 32
"""Verdicts remembered per process: a check is deterministic for one toolchain, and the
preview of a response re-checks (to compile) what its turn checked a moment before."""
_recent: OrderedDict[tuple[str, str], str] = OrderedDict()


async def _run(chain: Toolchain, code: str) -> str:
    key = (str(chain.home), hashlib.sha256(code.encode()).hexdigest())
    if key in _recent:
        _recent.move_to_end(key)
        return _recent[key]
    raw = await _node(chain, code)
    _recent[key] = raw
    while len(_recent) > RECENT:
        _recent.popitem(last=False)
    return raw


async def _node(chain: Toolchain, code: str) -> str:
    command = [chain.node, chain.script("check.mjs"), str(chain.home), str(STUBS)]
    payload = json.dumps({"code": code}).encode()
    try:
        with anyio.fail_after(CHECK_TIMEOUT):
            done: Any = await anyio.run_process(command, input=payload, check=False)
    except TimeoutError:
        raise GenUIError(f"the TSX checker took more than {CHECK_TIMEOUT:.0f} s") from None
    except OSError as exc:
        raise GenUIError(f"the TSX checker could not start: {exc}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise GenUIError("the TSX checker failed: " + " | ".join(tail))
    return done.stdout.decode()
