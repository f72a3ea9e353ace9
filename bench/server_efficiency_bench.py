"""Server efficiency: ``mol serve`` against a floor proxy, both in front of an instant engine,
driven by the official ``openai`` client, in one run.

The floor is written here: an aiohttp server with one pooled aiohttp client making the same
three engine calls per turn as mol (route, constrained -> answer -> summary, the summary
after the reply), with no litellm, no session store and nothing else. The engine answers at
once (a bare asyncio HTTP server in its own process), so what is measured is the proxies'
own work. Each proxy runs in its own process; its CPU is read from ``/proc``.

Figures, for both: CPU per turn at concurrency 16 (the summary hop included), c=1 median
latency of a non-streamed turn, the end of a streamed reply after its first token (c=1),
turns/s at concurrency 16, refusals (HTTP 429) at concurrency 64 with default settings, and
peak RSS. Then ``mol run`` (one turn against the same engine) against a bare
``python -c "import litellm"``, both as whole processes. Phases alternate between the two
proxies (``--blocks`` times) and medians are taken, so load that comes and goes hits both.
Each block also runs the same three calls per turn through bare ``litellm.acompletion`` (no
server, no mol): the CPU floor that reaching the engine through litellm sets, so
``cpu_over_bare_litellm_ratio`` is what mol adds over litellm itself. The same bare litellm
gives the c=1 latency and stream tail it sets, and, as a whole process (import, route,
answer: what ``mol run`` does at the least), the start-up floor. Ends with one JSON line.

Targets (issue 22): CPU per turn at most 7x the floor's, c=1 latency at most 2.5x the
floor's, no refusals at concurrency 64, ``mol run`` at most ``import litellm`` + 0.5 s.

    python bench/server_efficiency_bench.py [--blocks 3] [--turns 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from procs import free_port, start_healthy

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

KEY = "bench-key"
ANSWER = "Fixed: the off-by-one in the loop bound is gone and the tests pass."
LABELS = ["L0", "L1", "L2", "L3"]
HCP = """schema_version = 1
name = "bench"
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[router]
prompt = "Route the turn to one of L0, L1, L2, L3."
[adapters.L2]
prompt = "You are the coding specialist."
[session]
store = "sqlite:///{store}"
"""
TICKS = os.sysconf("SC_CLK_TCK")


def _uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


# -- the instant engine ----------------------------------------------------------------------

def _completion(body: dict) -> tuple[bytes, str]:
    """The engine's answer to one request: the router's label, or the fixed answer."""
    constraint = body.get("structured_outputs") or {}
    choices = constraint.get("choice") or body.get("guided_choice")
    text = ("L2" if "L2" in choices else choices[0]) if choices else ANSWER
    usage = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
    base = {"id": "chatcmpl-1", "created": int(time.time()), "model": body.get("model", "")}
    if not body.get("stream"):
        reply = {**base, "object": "chat.completion", "usage": usage, "choices": [{
            "index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}]}
        return json.dumps(reply).encode(), "application/json"

    def chunk(delta: dict, finish: str | None = None, **more: object) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        event = {**base, "object": "chat.completion.chunk", "choices": [choice], **more}
        return f"data: {json.dumps(event)}\n\n"

    words = text.split(" ")
    pieces = [chunk({"role": "assistant", "content": ""})]
    pieces += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
    pieces.append(chunk({}, "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        event = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        pieces.append(f"data: {json.dumps(event)}\n\n")
    pieces.append("data: [DONE]\n\n")
    return "".join(pieces).encode(), "text/event-stream"


class _EngineProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive and Content-Length bodies: all the engine's clients send."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            lines = self.buffer[:end].decode("latin-1").split("\r\n")
            length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                           if line.lower().startswith("content-length:")), 0)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            if lines[0].startswith("POST"):
                payload, kind = _completion(json.loads(body))
            else:  # GET /v1/models (the health checks)
                payload, kind = json.dumps({"object": "list", "data": [
                    {"id": name, "object": "model"} for name in LABELS]}).encode(), \
                    "application/json"
            head = (f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\n"
                    f"content-length: {len(payload)}\r\n\r\n")
            self.transport.write(head.encode() + payload)


async def _engine(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_EngineProtocol, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


# -- the floor proxy -------------------------------------------------------------------------

async def _floor(port: int, engine_url: str) -> None:
    """The three engine calls of a turn through one pooled client, nothing else."""
    import aiohttp
    from aiohttp import web

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    background: set[asyncio.Task] = set()

    async def call(body: dict) -> dict:
        async with session.post(engine_url + "/chat/completions", json=body,
                                headers={"authorization": "Bearer none"}) as answer:
            return await answer.json()

    async def summary(adapter: str, text: str, answer: str) -> None:
        await call({"model": adapter, "max_tokens": 64, "messages": [
            {"role": "system", "content": "Summarize the turn."},
            {"role": "user", "content": f"User: {text}\nAssistant: {answer}"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        body = await request.json()
        text = body["messages"][-1]["content"]
        route = await call({"model": "L0", "temperature": 0, "max_tokens": 4,
                            "structured_outputs": {"choice": LABELS}, "messages": [
                                {"role": "system", "content": "Route the turn."},
                                {"role": "user", "content": f"<turn>{text}</turn>"}]})
        adapter = route["choices"][0]["message"]["content"]
        ask = {"model": adapter, "messages": [
            {"role": "system", "content": "You are the coding specialist."},
            *body["messages"]]}
        base = {"id": "chatcmpl-floor", "created": int(time.time()), "model": body["model"]}
        if body.get("stream"):
            reply = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await reply.prepare(request)
            parts = []
            async with session.post(engine_url + "/chat/completions",
                                    json={**ask, "stream": True}) as answer:
                async for line in answer.content:
                    if not line.startswith(b"data: {"):
                        continue
                    chunk = json.loads(line[6:])
                    parts.append(chunk["choices"][0]["delta"].get("content") or "")
                    await reply.write(f"data: {json.dumps({**chunk, **base})}\n\n".encode())
            await reply.write(b"data: [DONE]\n\n")
            await reply.write_eof()
            content = "".join(parts)
        else:
            message = (await call(ask))["choices"][0]["message"]
            content = message["content"]
            reply = web.json_response({**base, "object": "chat.completion", "choices": [{
                "index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": content}}]})
            await reply.prepare(request)
            await reply.write_eof()
        task = asyncio.create_task(summary(adapter, text, content))
        background.add(task)
        task.add_done_callback(background.discard)
        return reply

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "mol"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/health", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


# -- bare litellm ----------------------------------------------------------------------------

def _bare_litellm() -> tuple[object, dict]:
    """litellm as mol's engine sets it up (the adapters priced at zero), and the call
    arguments every bare call shares."""
    import litellm

    litellm.suppress_debug_info = True  # as mol's engine sets it
    zero = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "mode": "chat",
            "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0}
    litellm.register_model({name: {**zero, "litellm_provider": "hosted_vllm"}
                            for label in LABELS for name in (label, "hosted_vllm/" + label)},
                           add_to_provider_model_sets=False)
    return litellm, {"max_retries": 0, "api_key": "none"}


async def _bare_reply(litellm, base: dict, stream: bool = False) -> tuple[str, str, float]:
    """Route and answer through bare ``litellm.acompletion``: the adapter, the answer and
    (streaming) the seconds from its first token to the end of its stream."""
    route = await litellm.acompletion(
        model="hosted_vllm/L0", temperature=0, max_tokens=4, **base,
        extra_body={"structured_outputs": {"choice": LABELS}},
        messages=[{"role": "user", "content": "<turn>fix the failing test</turn>"}])
    adapter = "hosted_vllm/" + route.choices[0].message.content
    if not stream:
        answer = await litellm.acompletion(model=adapter, messages=MESSAGES, **base)
        return adapter, answer.choices[0].message.content, 0.0
    first, parts = None, []
    async for chunk in await litellm.acompletion(model=adapter, messages=MESSAGES, **base,
                                                 stream=True,
                                                 stream_options={"include_usage": True}):
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter()
            parts.append(chunk.choices[0].delta.content)
    return adapter, "".join(parts), time.perf_counter() - (first or time.perf_counter())


async def _bare_summary(litellm, base: dict, adapter: str, answer: str) -> None:
    await litellm.acompletion(model=adapter, max_tokens=64, **base, messages=[
        {"role": "user", "content": "Summarize: " + answer}])


async def _litellm_turns(engine_url: str, turns: int) -> None:
    """A turn's three engine calls through bare ``litellm.acompletion``: ``turns`` of them
    from 16 workers (CPU of the whole process, its threads included), then c=1 latency and
    the stream tail as the proxies' are measured (the summary in the background): what
    litellm alone costs, printed as one JSON line."""
    litellm, base = _bare_litellm()
    base["api_base"] = engine_url

    async def turn() -> None:
        adapter, answer, _ = await _bare_reply(litellm, base)
        await _bare_summary(litellm, base, adapter, answer)

    left = [turns]

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            await turn()

    for _ in range(5):
        await turn()
    cpu = time.process_time()
    async with asyncio.TaskGroup() as group:
        for _ in range(16):
            group.create_task(worker())
    await asyncio.sleep(1.0)  # litellm's success logging runs after the calls return
    cpu_ms = (time.process_time() - cpu) * 1000 / turns
    latency, tails = [], []
    async with asyncio.TaskGroup() as group:
        for index in range(100):
            started = time.perf_counter()
            adapter, answer, tail = await _bare_reply(litellm, base, stream=index >= 60)
            (tails if index >= 60 else latency).append(
                tail if index >= 60 else time.perf_counter() - started)
            group.create_task(_bare_summary(litellm, base, adapter, answer))
    print(json.dumps({"cpu_ms_per_turn": cpu_ms,
                      "c1_latency_ms": statistics.median(latency[5:]) * 1000,
                      "stream_tail_ms": statistics.median(tails[5:]) * 1000}))


def _bare_run(engine_url: str) -> None:
    """What ``mol run`` does at the least through litellm, as a whole process: import it,
    route and answer, print the answer."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    litellm, base = _bare_litellm()
    print(asyncio.run(_bare_reply(litellm, {**base, "api_base": engine_url}))[1], flush=True)


def _litellm_floor(me: list[str], engine_url: str, turns: int) -> dict:
    done = subprocess.run([*me, "--role", "litellm", "--engine-url", engine_url,
                           "--turns", str(turns)], capture_output=True, text=True,
                          timeout=1200, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the driver ------------------------------------------------------------------------------

class Proxy:
    """One proxy process and the figures read from /proc."""

    def __init__(self, name: str, command: list[str], port: int, env: dict | None = None):
        self.name = name
        self.proc = start_healthy(command, port, name, env=env)
        self.url = f"http://127.0.0.1:{port}/v1"

    def cpu(self) -> float:
        """Seconds of CPU (user + system) the process has used."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


MESSAGES = [{"role": "user", "content": "fix the failing test"}]


async def _turn(client, stream: bool = False) -> tuple[float, float | None]:
    """One turn: its latency, and (streaming) the time from the first token to the end."""
    started = time.perf_counter()
    if not stream:
        reply = await client.chat.completions.create(model="mol", messages=MESSAGES)
        assert reply.choices[0].message.content == ANSWER, reply
        return time.perf_counter() - started, None
    first, parts = None, []
    stream_ = await client.chat.completions.create(model="mol", messages=MESSAGES, stream=True)
    async for chunk in stream_:
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter()
            parts.append(chunk.choices[0].delta.content)
    ended = time.perf_counter()
    assert "".join(parts) == ANSWER, parts
    return ended - started, ended - (first or ended)


async def _settle(proxy: Proxy) -> None:
    """Wait until the proxy's background work (summary hops) is done: its CPU stops moving."""
    last = proxy.cpu()
    for _ in range(100):
        await asyncio.sleep(0.2)
        now = proxy.cpu()
        if now == last:
            return
        last = now


async def _load(client, proxy: Proxy, concurrency: int, turns: int) -> dict:
    """``turns`` turns from ``concurrency`` workers: CPU per turn, turns/s, refusals."""
    import openai

    left = [turns]
    outcome = {"ok": 0, "refused": 0, "failed": 0}

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            try:
                await _turn(client)
                outcome["ok"] += 1
            except openai.RateLimitError:
                outcome["refused"] += 1
            except openai.APIError:
                outcome["failed"] += 1

    await _settle(proxy)
    cpu, started = proxy.cpu(), time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    wall = time.perf_counter() - started
    await _settle(proxy)
    return {**outcome, "turns_per_s": outcome["ok"] / wall,
            "cpu_ms_per_turn": (proxy.cpu() - cpu) * 1000 / max(outcome["ok"], 1)}


async def _block(proxy: Proxy, turns: int) -> dict:
    import openai

    async with openai.AsyncOpenAI(base_url=proxy.url, api_key=KEY, max_retries=0,
                                  timeout=120) as client:
        for _ in range(10):
            await _turn(client)
            await _turn(client, stream=True)
        latency = [(await _turn(client))[0] for _ in range(60)]
        tails = [(await _turn(client, stream=True))[1] for _ in range(40)]
        c16 = await _load(client, proxy, 16, turns)
        c64 = await _load(client, proxy, 64, 4 * 64)
    return {"c1_latency_ms": statistics.median(latency) * 1000,
            "stream_tail_ms": statistics.median(tails) * 1000,
            "cpu_ms_per_turn": c16["cpu_ms_per_turn"], "turns_per_s": c16["turns_per_s"],
            "c16_failed": c16["refused"] + c16["failed"],
            "c64_refused": c64["refused"], "c64_failed": c64["failed"],
            "c64_turns": 4 * 64}


def _timed(command: list[str], needle: str) -> float:
    """Seconds until a process prints ``needle``. Bytecode is cached as an installed
    package's is (``PYTHONDONTWRITEBYTECODE``, set on some machines, would make every start
    of an editable checkout compile mol's modules again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if needle in line:
                elapsed = time.perf_counter() - started
                proc.wait(timeout=60)
                return elapsed
        proc.wait(timeout=60)
    raise AssertionError(f"{command} exited {proc.returncode} without printing {needle!r}")


def _startup(hcp: Path, engine_url: str, runs: int) -> dict:
    """``mol run`` to its answer against a bare ``import litellm`` and against a bare
    litellm turn (import, route, answer: ``--role bare-run``), alternating."""
    me = [sys.executable, str(Path(__file__).resolve())]
    mol_run = [sys.executable, "-m", "mol.cli", "run", "--hcp", str(hcp), "--engine-url",
               engine_url, "fix the failing test"]
    _timed(mol_run, ANSWER)  # writes mol's bytecode cache, as installing it would
    imports, bares, answers = [], [], []
    for _ in range(runs):
        # To the line after the import, as mol run is timed to its answer: the interpreter's
        # shutdown after it (litellm's exit handlers) is in neither figure.
        imports.append(_timed([sys.executable, "-c", "import litellm; print('imported')"],
                              "imported"))
        bares.append(_timed([*me, "--role", "bare-run", "--engine-url", engine_url], ANSWER))
        answers.append(_timed(mol_run, ANSWER))
    imported, bare, run = (statistics.median(x) for x in (imports, bares, answers))
    return {"import_litellm_s": round(imported, 3), "bare_litellm_turn_s": round(bare, 3),
            "mol_run_answer_s": round(run, 3), "over_import_s": round(run - imported, 3),
            "bare_turn_over_import_s": round(bare - imported, 3),
            "over_bare_turn_s": round(run - bare, 3), "target_over_import_s": 0.5}


def _median(blocks: list[dict], key: str) -> float:
    return round(statistics.median(b[key] for b in blocks), 3)


async def _blocks(proxies: list[Proxy], blocks: int, turns: int) -> dict[str, list[dict]]:
    """``blocks`` rounds, alternating which proxy goes first."""
    results: dict[str, list[dict]] = {p.name: [] for p in proxies}
    for index in range(blocks):
        for proxy in proxies if index % 2 == 0 else proxies[::-1]:
            results[proxy.name].append(await _block(proxy, turns))
    return results


def main(blocks: int, turns: int, runs: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="mol-bench-"))
    hcp = folder / "bench.toml"
    hcp.write_text(HCP.format(store=folder / "sessions.db"))
    (folder / "key").write_text(KEY)
    me = [sys.executable, str(Path(__file__).resolve())]
    engine_port, floor_port, mol_port = free_port(), free_port(), free_port()
    engine = subprocess.Popen([*me, "--role", "engine", "--port", str(engine_port)])
    engine_url = f"http://127.0.0.1:{engine_port}/v1"
    proxies = []
    try:
        time.sleep(0.5)
        proxies.append(Proxy("floor", [*me, "--role", "floor", "--port", str(floor_port),
                                       "--engine-url", engine_url], floor_port))
        proxies.append(Proxy("mol", [sys.executable, "-m", "mol.cli", "serve", "--hcp",
                                     str(hcp), "--port", str(mol_port), "--engine-url",
                                     engine_url], mol_port,
                             {"MOL_API_KEY_FILE": str(folder / "key")}))
        results = asyncio.run(_blocks(proxies, blocks, turns))
        bare = [_litellm_floor(me, engine_url, turns) for _ in range(blocks)]
        litellm_floor = {key: _median(bare, key) for key in bare[0]}
        figures = {}
        for proxy in proxies:
            done = results[proxy.name]
            figures[proxy.name] = {key: _median(done, key) for key in done[0]}
            figures[proxy.name]["c64_refused_max"] = max(b["c64_refused"] for b in done)
            figures[proxy.name]["peak_rss_mb"] = round(proxy.peak_rss_mb(), 1)
        startup = _startup(hcp, engine_url, runs)
    finally:
        for proxy in proxies:
            proxy.stop()
        engine.terminate()
        engine.wait(timeout=30)
    mol, floor = figures["mol"], figures["floor"]
    return {
        "benchmark": "server_efficiency", "blocks": blocks, "turns_at_c16": turns,
        "uvloop": _has("uvloop"), "httptools": _has("httptools"),
        "mol": mol, "floor": floor,
        "bare_litellm": litellm_floor,
        "cpu_over_bare_litellm_ratio": round(mol["cpu_ms_per_turn"]
                                             / litellm_floor["cpu_ms_per_turn"], 2),
        "c1_latency_over_bare_litellm_ratio": round(mol["c1_latency_ms"]
                                                    / litellm_floor["c1_latency_ms"], 2),
        "bare_litellm_c1_latency_ratio": round(litellm_floor["c1_latency_ms"]
                                               / floor["c1_latency_ms"], 2),
        "bare_litellm_cpu_per_turn_ratio": round(litellm_floor["cpu_ms_per_turn"]
                                                 / floor["cpu_ms_per_turn"], 2),
        "cpu_per_turn_ratio": round(mol["cpu_ms_per_turn"] / floor["cpu_ms_per_turn"], 2),
        "c1_latency_ratio": round(mol["c1_latency_ms"] / floor["c1_latency_ms"], 2),
        "stream_tail_ratio": round(mol["stream_tail_ms"] / floor["stream_tail_ms"], 2),
        "turns_per_s_ratio": round(mol["turns_per_s"] / floor["turns_per_s"], 2),
        "rss_ratio": round(mol["peak_rss_mb"] / floor["peak_rss_mb"], 2),
        "mol_run": startup,
        "targets": {"cpu_per_turn_ratio": 7.0, "c1_latency_ratio": 2.5, "c64_refused": 0,
                    "mol_run_over_import_s": 0.5},
    }


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _report(f: dict) -> None:
    mol, floor = f["mol"], f["floor"]
    rows = [("CPU per turn, c=16 (ms)", "cpu_ms_per_turn", "cpu_per_turn_ratio"),
            ("latency, c=1, median (ms)", "c1_latency_ms", "c1_latency_ratio"),
            ("stream end after first token (ms)", "stream_tail_ms", "stream_tail_ratio"),
            ("turns/s, c=16", "turns_per_s", "turns_per_s_ratio"),
            ("peak RSS (MB)", "peak_rss_mb", "rss_ratio")]
    bare = f["bare_litellm"]
    print(f"{'':36} {'mol serve':>10} {'floor':>10} {'ratio':>7} {'litellm':>10}")
    for label, key, ratio in rows:
        print(f"{label:36} {mol[key]:10.2f} {floor[key]:10.2f} {f[ratio]:7.2f} "
              f"{bare[key] if key in bare else float('nan'):10.2f}")
    print(f"{'refused at c=64 (of ' + str(mol['c64_turns']) + ')':36} "
          f"{mol['c64_refused']:10.0f} {floor['c64_refused']:10.0f}")
    print(f"mol over bare litellm: CPU per turn {f['cpu_over_bare_litellm_ratio']:.2f}x, "
          f"c=1 latency {f['c1_latency_over_bare_litellm_ratio']:.2f}x")
    run = f["mol_run"]
    print(f"mol run to its answer {run['mol_run_answer_s']:.3f} s, bare import litellm "
          f"{run['import_litellm_s']:.3f} s (+{run['over_import_s']:.3f} s, target +0.5 s), "
          f"a bare litellm turn {run['bare_litellm_turn_s']:.3f} s "
          f"(+{run['bare_turn_over_import_s']:.3f} s)")
    print(json.dumps(f))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--turns", type=int, default=400, help="turns at concurrency 16")
    parser.add_argument("--runs", type=int, default=5, help="mol run / import litellm runs")
    parser.add_argument("--role", choices=["main", "engine", "floor", "litellm", "bare-run"],
                        default="main")
    parser.add_argument("--port", type=int)
    parser.add_argument("--engine-url")
    args = parser.parse_args()
    if args.role == "main":
        _report(main(args.blocks, args.turns, args.runs))
    elif args.role == "litellm":
        asyncio.run(_litellm_turns(args.engine_url, args.turns))
    elif args.role == "bare-run":
        _bare_run(args.engine_url)
    else:
        _uvloop()
        asyncio.run(_engine(args.port) if args.role == "engine"
                    else _floor(args.port, args.engine_url))
