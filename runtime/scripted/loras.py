"""The scripted engine's runtime LoRA loading, as vLLM and SGLang answer it.

vLLM (``lora_api="vllm"``): ``POST /v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``,
present only when runtime updating is on (vLLM's ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``);
otherwise the routes do not exist and vLLM's HTTP error handler answers 404 ``Not Found``.
Success is a plain-text 200 (``Success: LoRA adapter 'NAME' added successfully.``); errors
are vLLM's ``ErrorResponse`` with its wording (``serving_models.py``). SGLang
(``lora_api="sglang"``): ``POST /load_lora_adapter`` and ``/unload_lora_adapter`` answer
``{"success", "error_message", "loaded_adapters"}`` with 200 or 400 (``http_server.py``).

A path the scripted engine can load is an existing local file or folder. A loaded LoRA is
listed in ``/v1/models`` (``root`` its path, ``parent`` the base model) and answered with
the script's rules for its name, else for its unversioned name (``L2`` answers ``L2@abc...``).
vLLM's ``vllm:lora_requests_info`` gauge on ``/metrics`` tells the LoRAs with requests in
flight, as vLLM's Prometheus logger does: one series per label set, the value the time it
was last set.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mol.core.errors import UsageError
from mol.hcp.loras import unversioned
from mol.runtime.scripted.requests import HTTPProblem, parse_body

LORA_APIS = ("vllm", "sglang")
"""The dialects of runtime LoRA loading the scripted engine speaks."""

GAUGE = "vllm:lora_requests_info"


class LoraState:
    """The LoRAs loaded at runtime, their requests in flight, and the request records."""

    def __init__(self, api: str | None, runtime_updating: bool, base: str, max_loras: int,
                 on_record: Any) -> None:
        if api is not None and api not in LORA_APIS:
            raise UsageError(f"lora_api must be one of {LORA_APIS} or None, got {api!r}")
        if max_loras < 1:
            raise UsageError(f"max_loras must be at least 1, got {max_loras}")
        self.api, self.runtime_updating = api, runtime_updating
        self.base, self.max_loras = base, max_loras
        self.on_record = on_record
        self.loaded: dict[str, str] = {}
        """Name -> the path it was loaded from, in load order."""
        self.records: list[dict[str, Any]] = []
        self.in_flight: dict[str, int] = {}
        self.series: dict[tuple[str, str], float] = {}
        """``(waiting, running)`` label values -> the time the gauge was last set to them."""

    def served(self, adapters: list[str]) -> dict[str, str]:
        """Every model name a chat request may give -> the script adapter whose rules answer
        it: the script's own adapters, and each loaded LoRA (by its name, else unversioned)."""
        served = {name: name for name in adapters}
        for name in self.loaded:
            rules = name if name in adapters else unversioned(name)
            if rules in adapters:
                served[name] = rules
        return served

    def begin(self, model: str) -> None:
        """A request for ``model`` starts (counted when it is a loaded LoRA)."""
        if model in self.loaded:
            self.in_flight[model] = self.in_flight.get(model, 0) + 1
            self._set_gauge()

    def end(self, model: str) -> None:
        """A request for ``model`` is over."""
        if self.in_flight.get(model):
            self.in_flight[model] -= 1
            if not self.in_flight[model]:
                del self.in_flight[model]
            self._set_gauge()

    def _set_gauge(self) -> None:
        # vLLM runs at most max_loras LoRAs in a batch; requests for others wait.
        active = list(self.in_flight)
        running, waiting = active[:self.max_loras], active[self.max_loras:]
        last = max(self.series.values(), default=0.0)
        self.series[(",".join(waiting), ",".join(running))] = max(time.time(), last + 1e-3)

    def metrics(self) -> str:
        """``/metrics`` in Prometheus' text format: vLLM's LoRA gauge."""
        lines = [f"# HELP {GAUGE} Running stats on lora requests.", f"# TYPE {GAUGE} gauge"]
        for (waiting, running), when in self.series.items():
            lines.append(f'{GAUGE}{{max_lora="{self.max_loras}",waiting_lora_adapters='
                         f'"{waiting}",running_lora_adapters="{running}"}} {when!r}')
        return "\n".join(lines) + "\n"

    def models(self) -> list[dict[str, Any]]:
        """The ``/v1/models`` entries of the base model and the loaded LoRAs (vLLM's cards)."""
        base = {"id": self.base, "object": "model", "created": 0,
                "owned_by": "mol-scripted-engine", "root": self.base, "parent": None}
        return [base, *({"id": name, "object": "model", "created": 0,
                         "owned_by": "mol-scripted-engine", "root": path, "parent": self.base}
                        for name, path in self.loaded.items())]

    def routes(self) -> list[Route]:
        """The dialect's load and unload routes (none: vLLM without runtime updating)."""
        if self.api == "vllm" and self.runtime_updating:
            return [Route("/v1/load_lora_adapter", self._vllm_load, methods=["POST"]),
                    Route("/v1/unload_lora_adapter", self._vllm_unload, methods=["POST"])]
        if self.api == "sglang":
            return [Route("/load_lora_adapter", self._sglang_load, methods=["POST"]),
                    Route("/unload_lora_adapter", self._sglang_unload, methods=["POST"])]
        return []

    async def _read(self, request: Request) -> tuple[dict[str, Any], dict[str, Any]]:
        raw = await request.body()
        record: dict[str, Any] = {"seq": len(self.records) + 1, "path": request.url.path,
                                  "adapter": None, "rule": None, "status": 200,
                                  "body": raw.decode("utf-8", "replace")}
        self.records.append(record)
        try:
            record["body"] = body = parse_body(raw)
        except HTTPProblem as problem:
            record.update(status=problem.status, error=problem.message)
            self.on_record(record)
            raise
        record["adapter"] = body.get("lora_name")
        return record, body

    def _answer(self, record: dict[str, Any], response: Response, error: str | None) -> Response:
        record["status"] = response.status_code
        if error is not None:
            record["error"] = error
        self.on_record(record)
        return response

    async def _vllm_load(self, request: Request) -> Response:
        try:
            record, body = await self._read(request)
        except HTTPProblem as problem:
            return self._problem(problem)
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            problem = HTTPProblem(400, "Both 'lora_name' and 'lora_path' must be provided.",
                                  "InvalidUserInput")
        elif name in self.loaded and not body.get("load_inplace"):
            problem = HTTPProblem(400, f"The lora adapter '{name}' has already been loaded. If "
                                  "you want to load the adapter in place, set 'load_inplace' to "
                                  "True.", "InvalidUserInput")
        elif not _exists(path):
            problem = HTTPProblem(404, f"Loading lora {name} failed: No adapter found for {path}",
                                  "NotFoundError")
        else:
            self.loaded[name] = path
            return self._answer(record, Response(
                f"Success: LoRA adapter '{name}' added successfully."), None)
        return self._answer(record, _vllm_error(problem), problem.message)

    async def _vllm_unload(self, request: Request) -> Response:
        try:
            record, body = await self._read(request)
        except HTTPProblem as problem:
            return self._problem(problem)
        name = body.get("lora_name")
        if not name:
            problem = HTTPProblem(400, "'lora_name' needs to be provided to unload a LoRA "
                                  "adapter.", "InvalidUserInput")
        elif name not in self.loaded:
            problem = HTTPProblem(404, f"The lora adapter '{name}' cannot be found.",
                                  "NotFoundError")
        else:
            del self.loaded[name]
            return self._answer(record, Response(
                f"Success: LoRA adapter '{name}' removed successfully."), None)
        return self._answer(record, _vllm_error(problem), problem.message)

    async def _sglang_load(self, request: Request) -> Response:
        try:
            record, body = await self._read(request)
        except HTTPProblem as problem:
            return self._problem(problem)
        name, path = body.get("lora_name"), body.get("lora_path")
        if not self.runtime_updating:
            return self._sglang(record, "LoRA is not enabled. Please set `--enable-lora` to "
                                "enable LoRA.", listed=False)
        if not isinstance(path, str) or not _exists(path):
            # SGLang reads a path that is no folder as a Hugging Face repo id.
            return self._sglang(record, "Repo id must be in the form 'repo_name' or "
                                f"'namespace/repo_name': '{path}'. Use `repo_type` argument "
                                "if needed.")
        if name in self.loaded:
            return self._sglang(record, f"Failed to load LoRA adapter {name} because it is "
                                "already loaded")
        self.loaded[str(name)] = path
        return self._sglang(record, None)

    async def _sglang_unload(self, request: Request) -> Response:
        try:
            record, body = await self._read(request)
        except HTTPProblem as problem:
            return self._problem(problem)
        name = body.get("lora_name")
        if not self.runtime_updating:
            return self._sglang(record, "LoRA is not enabled. Please set `--enable-lora` to "
                                "enable LoRA.", listed=False)
        if name not in self.loaded:
            keys = ", ".join(repr(key) for key in self.loaded)
            return self._sglang(record, f"LoRA with name {name} does not exist. Loaded LoRAs: "
                                f"dict_keys([{keys}])", listed=False)
        del self.loaded[name]
        return self._sglang(record, None)

    def _sglang(self, record: dict[str, Any], error: str | None, listed: bool = True) -> Response:
        """SGLang's ``LoadLoRAAdapterReqOutput`` (the scheduler's answers list the loaded
        adapters; the tokenizer's own refusals do not)."""
        body = {"success": error is None, "error_message": error or "",
                "loaded_adapters": dict(self.loaded) if listed else None}
        return self._answer(record, JSONResponse(body, status_code=200 if error is None else 400),
                            error)

    @staticmethod
    def _problem(problem: HTTPProblem) -> Response:
        return JSONResponse(problem.body(), status_code=problem.status)


def _vllm_error(problem: HTTPProblem) -> Response:
    return JSONResponse(problem.body(), status_code=problem.status)


def _exists(path: str) -> bool:
    """Whether a LoRA path names a local file or folder (a stat: cheap enough on the loop)."""
    return Path(path).exists()
