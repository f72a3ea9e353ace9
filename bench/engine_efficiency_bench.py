"""Engine efficiency: what one user turn asks of the engine, with eager or deferred summaries
and with speculation off or sticky.

One session of 40 turns whose routing follows a realistic pattern: runs of 5-10 turns on
one adapter, five switches (L2 x8, L1 x5, L2 x7, L0 x6, L3 x5, L2 x9). At its end the
session goes idle (``Session.settle``: deferred summaries still open are written, as
``mol serve`` does after ``idle_after`` quiet seconds); those requests are counted.

1. **Scripted engine** with per-request latency: the route hop 150 ms (``route_latency``),
   an answer's first token 300 ms, a summary 400 ms (the rules' ``delay``). Each of
   ``[summary] when`` eager / deferred x ``[router] speculate`` off / sticky plays the
   session, answers streamed, and reports engine requests per turn (cancelled speculative
   ones included), prompt / completion / cached tokens per turn, the time to the first
   streamed token (median, p90; and the median of the turns whose guess held), and the
   engine's busy time (the sum of every request's time on the engine, cancelled ones until
   cancelled: what the engine's request slots spend). The same run times the answer hop
   alone: the same streamed request made directly, its own first-token latency.
2. **Local engine** (llama.cpp, SmolLM2-135M; needs the ``local`` extra): the same session,
   eager and deferred (speculation off, so requests run one at a time and llama.cpp's
   timing lines in its log belong to one request each), reporting the prompt tokens
   llama.cpp evaluated per turn, by hop. SmolLM2-135M does not route like a trained router,
   so each route request is made as mol makes it and its label then replaced by the
   session's plan. The route is measured in both layouts: ``system`` (the quoted turn last,
   after the router prompt, so only the turn is new) and ``prefill`` (the turn first, as the
   Macaron router was trained).

Ends with one JSON line. The machine may be shared: compare figures within one run.

    python bench/engine_efficiency_bench.py [--no-local]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PLAN = [("L2", 8), ("L1", 5), ("L2", 7), ("L0", 6), ("L3", 5), ("L2", 9)]
ADAPTERS = ("L0", "L1", "L2", "L3")
TOPICS = ["parser", "billing", "login", "cache", "report", "upload", "search", "export",
          "metrics", "queue"]
ASKS = {  # (what marks the turn for the scripted router, the turn)
    "L0": ("chat:", "Let's chat: what makes a good explanation of the {t} idea?"),
    "L1": ("schedule", "Please schedule a review of the {t} work with the team."),
    "L2": ("code", "Fix the code of the {t} module so its tests pass, then explain."),
    "L3": ("interface", "Build an interface that shows the {t} status at a glance."),
}
ROUTE, FIRST_TOKEN, SUMMARY = 0.15, 0.30, 0.40
ANSWER = ("Done: I looked at it, changed what was needed and checked the result; "
          "here is what I found and what I would do next.")


def session_turns() -> list[tuple[str, str]]:
    """(adapter, user text) of the 40 turns."""
    turns, count = [], 0
    for adapter, run in PLAN:
        for _ in range(run):
            template = ASKS[adapter][1]
            turns.append((adapter, f"{template.format(t=TOPICS[count % len(TOPICS)])} "
                                   f"(turn {count + 1})"))
            count += 1
    return turns


def script() -> dict[str, list[dict[str, Any]]]:
    rules: dict[str, list[dict[str, Any]]] = {a: [] for a in ADAPTERS}
    for adapter, (mark, _) in ASKS.items():
        rules["L0"].append({"constrained": True, "when": re.escape(mark), "times": -1,
                            "reply": adapter})
    for adapter in ADAPTERS:
        rules[adapter] += [
            {"when_system": "^Summarize", "times": -1, "delay": SUMMARY,
             "reply": f"The user asked {adapter} for help; it did the work and reported."},
            {"times": -1, "delay": FIRST_TOKEN, "reply": f"{adapter}: {ANSWER}"}]
    return rules


def hcp_text(when: str, speculate: str, engine: str = "hosted_vllm/",
             extra: str = "") -> str:
    adapters = "".join(f'[adapters.{a}]\nprompt = "You are specialist {a} of an assistant."\n'
                       for a in ADAPTERS)
    return (f'schema_version = 2\nname = "efficiency"\n[engine]\n'
            f'api_base = "http://127.0.0.1:9/v1"\nmodel_prefix = "{engine}"\nmax_retries = 0\n'
            f'[router]\nprompt = "Route the turn to L0, L1, L2 or L3."\nspeculate = '
            f'"{speculate}"\n{adapters}[summary]\nwhen = "{when}"\n{extra}')


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def scripted_run(when: str, speculate: str, folder: Path) -> dict[str, Any]:
    """Play the session on a fresh scripted engine; the figures of one setting."""
    from mol.core import events as ev
    from mol.hcp.loader import load
    from mol.runtime import Runtime
    from mol.runtime.testing import ScriptedEngine

    path = folder / f"{when}-{speculate}.toml"
    path.write_text(hcp_text(when, speculate))
    artifact = load(path)
    ttft, held = [], []
    async with ScriptedEngine.serve(script(), route_latency=ROUTE) as engine:
        runtime = Runtime(artifact, engine_url=engine.base_url)
        await anyio.to_thread.run_sync(runtime.engine.load)
        await _warm(runtime.engine)
        started = time.perf_counter()
        async with runtime.session() as session:
            for adapter, text in session_turns():
                began, first = time.perf_counter(), []

                def watch(event: Any, began: float = began, first: list = first) -> None:
                    if isinstance(event, ev.TextDelta) and not first:
                        first.append(time.perf_counter() - began)

                session.observers = [watch]
                result = await session.turn(text, stream=True)
                assert result.adapter == adapter, (text, result.adapter)
                ttft.append(first[0])
                if any(isinstance(e, ev.Speculated) and e.held for e in result.events):
                    held.append(first[0])
            await session.settle()  # the session goes idle
        wall = time.perf_counter() - started
        records = [r for r in engine.requests if r["body"]["messages"][-1]["content"] != "warm"]
    turns = len(session_turns())
    done = [r for r in records if not r.get("cancelled")]
    usage = [r["usage"] for r in records if "usage" in r]
    row = {"when": when, "speculate": speculate,
           "requests_per_turn": round(len(records) / turns, 3),
           "cancelled_requests": len(records) - len(done),
           "summary_requests": sum(1 for r in records if r["constraint"] is None and
                                   r["body"]["messages"][0]["content"].startswith("Summarize")),
           "prompt_tokens_per_turn": round(sum(u["prompt_tokens"] for u in usage) / turns, 1),
           "cached_tokens_per_turn": round(sum(u["prompt_tokens_details"]["cached_tokens"]
                                               for u in usage) / turns, 1),
           "completion_tokens_per_turn": round(sum(r["usage"]["completion_tokens"]
                                                   for r in done if "usage" in r) / turns, 1),
           "ttft_ms_median": round(1000 * statistics.median(ttft), 1),
           "ttft_ms_p90": round(1000 * quantile(ttft, 0.9), 1),
           "engine_busy_s": round(sum(r.get("duration", 0.0) for r in records), 2),
           "wall_s": round(wall, 2)}
    if held:
        row["held_turns"] = len(held)
        row["ttft_ms_median_held"] = round(1000 * statistics.median(held), 1)
    return row


async def _warm(engine: Any) -> None:
    """One request to each adapter's path through litellm before timing anything."""
    for adapter in ADAPTERS:
        await engine.complete(adapter, [{"role": "user", "content": "warm"}])


async def answer_alone(rounds: int = 15) -> float:
    """The answer hop's own first-token latency: the same kind of streamed request, made
    directly through the engine client (no route, no mol turn around it); median, s."""
    from mol.runtime import LiteLLMEngine
    from mol.runtime.testing import ScriptedEngine

    times = []
    async with ScriptedEngine.serve(script(), route_latency=ROUTE) as engine:
        client = LiteLLMEngine(engine.base_url, model_prefix="hosted_vllm/", max_retries=0)
        await anyio.to_thread.run_sync(client.load)
        await _warm(client)
        for n in range(rounds):
            began, first = time.perf_counter(), []

            async def on_delta(delta: Any, began: float = began, first: list = first) -> None:
                if delta.text and not first:
                    first.append(time.perf_counter() - began)

            await client.complete("L2", [{"role": "system", "content": "You are L2."},
                                         {"role": "user", "content": f"Fix the code ({n})."}],
                                  on_delta=on_delta)
            times.append(first[0])
    return statistics.median(times)


# -- the local engine ----------------------------------------------------------------------

_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


class Steered:
    """The local engine as the session sees it: each route request is made as mol makes
    it, then its label replaced by the plan's; every request's evaluated prompt tokens
    are read from llama.cpp's timing lines in the server's log, by hop."""

    def __init__(self, inner: Any, log: Path) -> None:
        self.inner, self.log = inner, log
        self.label = "L0"
        self.seen = 0
        self.evaluated: list[tuple[str, int]] = []
        self.prompts: list[tuple[str, int]] = []
        """Per request, its hop and its prompt's size in tokens (the engine's usage)."""

    async def complete(self, adapter: str, messages: list[dict[str, Any]], **kw: Any) -> Any:
        completion = await self.inner.complete(adapter, messages, **kw)
        hop = "route" if kw.get("choices") else "summary" if str(
            messages[0].get("content", "")).startswith("Summarize") else "answer"
        self.evaluated.append((hop, await self._read()))
        self.prompts.append((hop, completion.usage.prompt_tokens))
        if kw.get("choices"):
            completion = dataclasses.replace(completion, content=self.label)
        return completion

    async def _read(self) -> int:
        """The prompt tokens of the timing lines written since the last request."""
        with anyio.fail_after(15):
            while len(found := _EVAL.findall(self.log.read_text())) <= self.seen:  # noqa: ASYNC110
                await anyio.sleep(0.02)  # another process writes the log: poll it
        await anyio.sleep(0.05)  # a request may evaluate twice (the tools chat format)
        found = _EVAL.findall(self.log.read_text())
        new, self.seen = found[self.seen:], len(found)
        return sum(int(tokens) for _, tokens in new)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


LOCAL_PARAMS = "params = { temperature = 0.0, max_tokens = 24 }\n"


def local_hcp(folder: Path, when: str, layout: str) -> Path:
    prompts = Path(__file__).resolve().parent.parent / "hcp" / "examples" / "prompts"
    router = (prompts / "router.md").read_text().rstrip()
    if layout == "prefill":  # the last line is the prefill the engine continues
        router = router.rsplit("\n", 1)[0] + "\nAnswer with exactly one label.\nmodel_id="
    (folder / f"router-{layout}.md").write_text(router + "\n")
    adapters = "".join(f'[adapters.{a}]\nprompt = {{ path = "{prompts / name}" }}\n{LOCAL_PARAMS}'
                       for a, name in zip(ADAPTERS, ("chat.md", "agent.md", "coding.md",
                                                     "genui.md"), strict=True))
    path = folder / f"local-{when}-{layout}.toml"
    path.write_text(f'schema_version = 2\nname = "local-efficiency"\n[engine]\n'
                    f'api_base = "http://127.0.0.1:9/v1"\nmodel_prefix = "openai/"\n'
                    f'routing_constraint = "grammar"\ntimeout_sec = 300\nmax_retries = 0\n'
                    f'[router]\nprompt = {{ path = "router-{layout}.md" }}\nlayout = "{layout}"\n'
                    f'fallback = "L0"\n{adapters}[summary]\nwhen = "{when}"\nadapter = "L0"\n'
                    f'prompt = {{ path = "{prompts / "summary.md"}" }}\nmax_tokens = 24\n')
    return path


async def local_run(when: str, layout: str, folder: Path) -> dict[str, Any]:
    """The session on a fresh local engine: prompt tokens evaluated per turn, by hop."""
    from mol.hcp.loader import load
    from mol.runtime import LiteLLMEngine, Runtime
    from mol.runtime.llamacpp.supervisor import LocalEngine, LocalEngineConfig

    artifact = load(local_hcp(folder, when, layout))
    async with LocalEngine(LocalEngineConfig(port=0), progress=None) as local:
        inner = LiteLLMEngine.from_artifact(artifact, local.base_url)
        steered = Steered(inner, local.log_path)
        runtime = Runtime(artifact, engine=steered)
        started = time.perf_counter()
        async with runtime.session() as session:
            for number, (adapter, text) in enumerate(session_turns(), 1):
                steered.label = adapter
                await session.turn(text)
                print(f"  local {when:8} {layout:7} turn {number:2} {adapter}", file=sys.stderr,
                      flush=True)
            await session.settle()
        wall = time.perf_counter() - started
    turns = len(session_turns())
    by_hop = {hop: [n for h, n in steered.evaluated if h == hop]
              for hop in ("route", "answer", "summary")}
    return {"when": when, "layout": layout, "requests_per_turn":
            round(len(steered.evaluated) / turns, 3),
            "evaluated_per_turn": round(sum(n for _, n in steered.evaluated) / turns, 1),
            **{f"{hop}_evaluated_per_turn": round(sum(v) / turns, 1)
               for hop, v in by_hop.items()},
            "route_evaluated_median": statistics.median(by_hop["route"]),
            "route_prompt_tokens_median": statistics.median(
                n for h, n in steered.prompts if h == "route"),
            "wall_s": round(wall, 1)}


async def local_part(figures: dict[str, Any], folder: Path) -> None:
    """The local engine's figures, or why they are missing (``local_skipped``): without the
    ``local`` extra the part is skipped, saying so, and the scripted figures still count."""
    from mol.core.errors import LocalEngineError

    for when, layout in (("eager", "system"), ("deferred", "system"), ("deferred", "prefill")):
        try:
            figures[f"local_{when}_{layout}"] = await local_run(when, layout, folder)
        except LocalEngineError as exc:  # not installed: raised before any request
            figures["local_skipped"] = str(exc)
            print(f"the local engine part is skipped: {exc}", file=sys.stderr, flush=True)
            return


async def main(local: bool) -> None:
    figures: dict[str, Any] = {"turns": len(session_turns()), "switches": len(PLAN) - 1,
                               "latency_ms": {"route": ROUTE * 1000,
                                              "answer_first_token": FIRST_TOKEN * 1000,
                                              "summary": SUMMARY * 1000}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = []
        for when in ("eager", "deferred"):
            for speculate in ("off", "sticky"):
                row = await scripted_run(when, speculate, folder)
                rows.append(row)
                print(f"{when:8} {speculate:6} requests/turn {row['requests_per_turn']:5.3f} "
                      f"prompt/turn {row['prompt_tokens_per_turn']:7.1f} cached/turn "
                      f"{row['cached_tokens_per_turn']:7.1f} completion/turn "
                      f"{row['completion_tokens_per_turn']:5.1f} TTFT median "
                      f"{row['ttft_ms_median']:6.1f} ms p90 {row['ttft_ms_p90']:6.1f} ms "
                      f"busy {row['engine_busy_s']:5.2f} s", file=sys.stderr, flush=True)
        alone = await answer_alone()
        figures["answer_alone_ttft_ms_median"] = round(1000 * alone, 1)
        for row in rows:
            figures[f"{row['when']}_{row['speculate']}"] = row
        held = figures["deferred_sticky"].get("ttft_ms_median_held")
        if held:
            figures["deferred_sticky_held_ttft_over_answer_alone"] = round(held / (1000 * alone),
                                                                          3)
        if local:
            await local_part(figures, folder)
    print(json.dumps(figures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-local", action="store_true", help="skip the local engine part")
    anyio.run(main, not parser.parse_args().no_local)
