"""Prefix caching on a real engine: appended cross-adapter summaries vs summaries at the top.

A 10-turn session over the four adapters of the local engine (llama.cpp, SmolLM2-135M). Each
adapter keeps its own view: its system prompt, then the turns it handled. Before a new turn,
the summaries of the turns other adapters handled since are added to the view:

* appended (mol's design): as one context message right before the new user message, so
  every request of an adapter extends its previous one byte for byte;
* top (baseline): as one context message at the top of the prompt, right after the system
  prompt, holding every other adapter's summary so far, so the prompt changes early.

Each variant runs on a fresh engine (same model, same prompts, greedy decoding). Per turn it
reports the prompt tokens the engine had to evaluate (llama.cpp's own timings in the server
log) and the time to the first streamed token. Needs the 'local' extra:

    python bench/prefix_cache_bench.py
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from mol.runtime.llamacpp.supervisor import LocalEngine, LocalEngineConfig

PROMPTS = Path(__file__).resolve().parent.parent / "hcp" / "examples" / "prompts"
SYSTEM = {"L0": "chat.md", "L1": "agent.md", "L2": "coding.md", "L3": "genui.md"}
SESSION = [  # (adapter, user turn)
    ("L0", "Hi! Can you tell me what a mixture of LoRA adapters is?"),
    ("L2", "Write a Python function that reverses a string."),
    ("L1", "Remind me to call the dentist tomorrow at nine."),
    ("L2", "Now add a docstring and a test for that function."),
    ("L0", "Thanks. What is the capital of Portugal?"),
    ("L3", "Make a small login form with a remember-me checkbox."),
    ("L2", "Run the tests and tell me if they pass."),
    ("L1", "Also book a table for two on Friday evening."),
    ("L0", "What did we talk about so far?"),
    ("L2", "Rename the function to reverse_text everywhere."),
]
MAX_TOKENS = 24
_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def _context(summaries: list[str]) -> dict[str, str]:
    return {"role": "user", "content": "Context from turns handled by other specialists:\n"
            + "\n".join(f"- {s}" for s in summaries)}


def build_prompt(variant: str, adapter: str, history: list[dict], pending: list[str],
                 every_other: list[str], user: str) -> list[dict]:
    """The request of one turn. ``history`` is the adapter's view after its system prompt."""
    system = {"role": "system", "content": (PROMPTS / SYSTEM[adapter]).read_text()}
    turn = {"role": "user", "content": user}
    if variant == "appended":
        return [system, *history, *([_context(pending)] if pending else []), turn]
    return [system, *([_context(every_other)] if every_other else []), *history, turn]


def _evaluated(log: str, seen: int) -> tuple[int, int] | None:
    """Prompt tokens evaluated by the newest request: (count of timing lines, tokens)."""
    found = _EVAL.findall(log)
    return (len(found), int(found[-1][1])) if len(found) > seen else None


async def _request(client: httpx.AsyncClient, adapter: str, messages: list[dict]) -> dict:
    body = {"model": adapter, "messages": messages, "max_tokens": MAX_TOKENS,
            "temperature": 0.0, "stream": True}
    started = time.perf_counter()
    ttft, text = None, []
    async with client.stream("POST", "/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0]["delta"]
            if delta.get("content"):
                ttft = ttft or time.perf_counter() - started
                text.append(delta["content"])
    return {"ttft_ms": 1000 * (ttft or time.perf_counter() - started), "reply": "".join(text)}


async def run_variant(variant: str) -> list[dict[str, Any]]:
    """Play the session on a fresh engine; one row per turn."""
    views: dict[str, list[dict]] = {name: [] for name in SYSTEM}
    pending: dict[str, list[str]] = {name: [] for name in SYSTEM}
    done: list[tuple[str, str]] = []  # (adapter, summary) of every turn so far
    rows, seen = [], 0
    async with LocalEngine(LocalEngineConfig(port=0), progress=None) as engine:
        async with httpx.AsyncClient(base_url=engine.base_url, timeout=120) as client:
            for number, (adapter, user) in enumerate(SESSION, 1):
                others = [s for a, s in done if a != adapter]
                messages = build_prompt(variant, adapter, views[adapter], pending[adapter],
                                        others, user)
                result = await _request(client, adapter, messages)
                with anyio.fail_after(10):  # the timing line lands just before the last chunk
                    # another process writes the log: polling is the only way to see it
                    while (found := _evaluated(engine.log_path.read_text(), seen)) is None:  # noqa: ASYNC110
                        await anyio.sleep(0.02)
                seen, evaluated = found
                if variant == "appended" and pending[adapter]:
                    views[adapter].append(_context(pending[adapter]))
                views[adapter] += [{"role": "user", "content": user},
                                   {"role": "assistant", "content": result["reply"]}]
                summary = f"{adapter} handled: {user}"
                pending[adapter] = []
                for name in pending:
                    if name != adapter:
                        pending[name].append(summary)
                done.append((adapter, summary))
                rows.append({"variant": variant, "turn": number, "adapter": adapter,
                             "evaluated": evaluated, "ttft_ms": round(result["ttft_ms"], 1)})
                print(f"  {variant:8} turn {number:2} {adapter}: evaluated {evaluated:4} "
                      f"prompt tokens, first token after {result['ttft_ms']:7.1f} ms",
                      file=sys.stderr, flush=True)
    return rows


async def main() -> None:
    """Run both variants and print the figures."""
    results = {}
    for variant in ("appended", "top"):
        print(f"== {variant}", file=sys.stderr, flush=True)
        results[variant] = await run_variant(variant)
    figures: dict[str, Any] = {"turns": len(SESSION), "model": "SmolLM2-135M-Instruct"}
    # Warm turns: the adapter handled a turn before, so it has a prefix to reuse (an
    # adapter's first turn is cold in both variants by construction).
    warm = [n for n, (adapter, _) in enumerate(SESSION) if adapter in dict(SESSION[:n])]
    for variant, rows in results.items():
        for part, chosen in (("all", rows), ("warm", [rows[n] for n in warm])):
            figures[f"{variant}_{part}_evaluated_median"] = statistics.median(
                r["evaluated"] for r in chosen)
            figures[f"{variant}_{part}_ttft_ms_median"] = statistics.median(
                r["ttft_ms"] for r in chosen)
        figures[f"{variant}_evaluated_total"] = sum(r["evaluated"] for r in rows)
        figures[f"{variant}_evaluated_per_turn"] = [r["evaluated"] for r in rows]
    for part in ("all", "warm"):
        for figure in ("evaluated", "ttft_ms"):
            top = figures[f"top_{part}_{figure}_median"]
            appended = figures[f"appended_{part}_{figure}_median"]
            figures[f"{part}_{figure}_ratio_top_over_appended"] = round(top / max(appended, 1), 2)
            print(f"{part:4} turns, median {figure:9}: appended {appended:8.1f}, "
                  f"top {top:8.1f}, ratio top/appended "
                  f"{figures[f'{part}_{figure}_ratio_top_over_appended']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    anyio.run(main)
