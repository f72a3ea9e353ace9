"""Harness overhead per turn, against the same engine calls made with bare litellm.

One turn = route (L0, constrained) -> L2 calls a tool -> L2 answers -> summary (L0).
The baseline replays exactly the request bodies the harness sent, through
``litellm.acompletion``, against the same scripted engine in the same run;
rounds alternate so machine noise hits both alike. Prints medians, mol's
own time per turn (the turn minus the engine calls inside it) and the ratio
(median over paired rounds), then one JSON line. Target: ratio <= 1.10.

With ``--otlp-endpoint URL`` (an OTLP/HTTP receiver: say Arize Phoenix, as the tracing
tests run it), each round also runs a traced turn (``[telemetry] traces = "otlp"``: an
``invoke_agent`` span, four ``chat`` spans and an ``execute_tool`` span exported to the
receiver in the SDK's batch thread) and the figures add its median and the cost of tracing
per turn (median over paired rounds of traced minus untraced).

    python bench/harness_bench.py [--rounds 40] [--otlp-endpoint http://127.0.0.1:6006]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L2]]
when = "^fix"
times = -1
tool_calls = [{ name = "echo", arguments = { text = "ping" } }]
[[L2]]
when = "PING"
times = -1
reply = "Fixed: the echo tool answered PING."
[[L0]]
constrained = false
times = -1
reply = "The user asked for a fix; L2 ran echo and reported success."
"""

HCP = """schema_version = 1
name = "bench"
[engine]
api_base = "http://127.0.0.1:9/v1"
model_prefix = "hosted_vllm/"
max_retries = 0
[router]
prompt = "Route the turn to one of L0, L1, L2, L3."
[adapters.L2]
prompt = "You are the coding specialist."
tools.allow = ["echo"]
"""


class Echo:
    """The one tool of the benchmark, as a plugin."""

    from mol.plugins import hookimpl

    @hookimpl
    def mol_register_tools(self, register):
        def echo(text: str) -> str:
            """Echo the text in capitals."""
            return text.upper()

        register(echo)


async def main(rounds: int, endpoint: str | None = None) -> dict:
    from contextlib import AsyncExitStack

    import litellm

    from mol.hcp.loader import load
    from mol.plugins.manager import PluginManager
    from mol.runtime import Runtime
    from mol.runtime.testing import ScriptedEngine

    folder = Path(tempfile.mkdtemp())
    (folder / "bench.toml").write_text(HCP)
    artifact = load(folder / "bench.toml")
    plugins = PluginManager(None, builtin=(), extra=[("echo", Echo())])
    own_times: list[float] = []
    async with ScriptedEngine.serve(SCRIPT) as engine, AsyncExitStack() as stack:

        async def harness_turn(tracer: object = None) -> float:
            started = time.perf_counter()
            runtime = Runtime(artifact, engine_url=engine.base_url, plugins=plugins,
                              tracer=tracer)
            async with runtime.session() as h:
                result = await h.turn("fix the failing test")
            elapsed = time.perf_counter() - started
            assert result.answer.startswith("Fixed"), result.answer
            if tracer is None:
                engine_time = sum(e.duration for e in result.events if e.type == "model_call")
                own_times.append(elapsed - engine_time)
            return elapsed

        legs = {"mol": harness_turn}
        if endpoint is not None:
            tracer = await stack.enter_async_context(_tracer(folder, endpoint))
            legs["traced"] = lambda: harness_turn(tracer)
        await harness_turn()  # warm-up: imports litellm, opens connections
        recorded = [r["body"] for r in engine.requests[-4:]]

        async def raw_turn() -> float:
            started = time.perf_counter()
            for body in recorded:
                kwargs = {k: v for k, v in body.items() if k not in ("model", "messages")}
                extra = {k: kwargs.pop(k) for k in ("structured_outputs",) if k in kwargs}
                await litellm.acompletion(
                    model="hosted_vllm/" + body["model"], messages=body["messages"],
                    api_base=engine.base_url, api_key="none", extra_body=extra or None,
                    **kwargs)
            return time.perf_counter() - started

        await raw_turn()
        legs["litellm"] = raw_turn
        for leg in legs.values():  # the traced turn's warm-up imports the SDK
            await leg()
        times: dict[str, list[float]] = {name: [] for name in legs}
        for index in range(rounds):
            # Rotate the order, so machine noise and the export thread hit every leg alike.
            names = list(legs)[index % len(legs):] + list(legs)[:index % len(legs)]
            for name in names:
                times[name].append(await legs[name]())
    mol_times, raw_times = times["mol"], times["litellm"]
    mol_median, raw_median = statistics.median(mol_times), statistics.median(raw_times)
    # Rounds are paired (run back to back), so the median of per-round ratios is
    # the figure least moved by load that comes and goes during the run.
    paired = statistics.median(m / r for m, r in zip(mol_times, raw_times, strict=True))
    return {
        "benchmark": "harness_overhead_per_turn",
        "rounds": rounds,
        "engine_calls_per_turn": len(recorded),
        "mol_turn_ms_median": round(mol_median * 1000, 3),
        "litellm_turn_ms_median": round(raw_median * 1000, 3),
        "overhead_ms_median": round((mol_median - raw_median) * 1000, 3),
        "ratio": round(paired, 4),
        "ratio_of_medians": round(mol_median / raw_median, 4),
        "mol_own_ms_median": round(statistics.median(own_times[-rounds:]) * 1000, 3),
        "target_ratio": 1.10,
        **(_traced(times["traced"], mol_times) if "traced" in times else {"tracing": "off"}),
    }


def _tracer(folder: Path, endpoint: str):
    """The tracer of a traced copy of the artifact, exporting to ``endpoint``."""
    from mol.hcp.loader import load
    from mol.runtime import open_tracer

    (folder / "traced.toml").write_text(
        HCP + f'[telemetry]\ntraces = "otlp"\nendpoint = "{endpoint}"\n')
    return open_tracer(load(folder / "traced.toml"))


def _traced(traced: list[float], untraced: list[float]) -> dict:
    """The traced turns' figures: their median and what tracing costs per turn."""
    return {
        "tracing": "on",
        "traced_turn_ms_median": round(statistics.median(traced) * 1000, 3),
        "tracing_cost_ms_per_turn": round(statistics.median(
            t - u for t, u in zip(traced, untraced, strict=True)) * 1000, 3),
        "traced_ratio": round(statistics.median(
            t / u for t, u in zip(traced, untraced, strict=True)), 4),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--otlp-endpoint", help="trace a third turn per round to this OTLP/HTTP "
                        "receiver (its base URL: /v1/traces is added)")
    arguments = parser.parse_args()
    figures = anyio.run(main, arguments.rounds, arguments.otlp_endpoint)
    print(f"mol harness turn   median {figures['mol_turn_ms_median']:9.3f} ms")
    print(f"bare litellm calls median {figures['litellm_turn_ms_median']:9.3f} ms "
          f"({figures['engine_calls_per_turn']} calls)")
    print(f"mol's own time per turn (turn minus its engine calls) median "
          f"{figures['mol_own_ms_median']:.3f} ms")
    print(f"ratio (median of paired rounds) {figures['ratio']:.3f}, ratio of medians "
          f"{figures['ratio_of_medians']:.3f} (target <= {figures['target_ratio']})")
    if figures["tracing"] == "on":
        print(f"traced turn        median {figures['traced_turn_ms_median']:9.3f} ms: tracing "
              f"costs {figures['tracing_cost_ms_per_turn']:.3f} ms per turn (paired median)")
    print(json.dumps(figures))
