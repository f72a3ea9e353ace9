"""The running engine's LoRAs: what it serves, and registering an artifact's LoRAs with it
in the engine's dialect (``[engine] lora_api``).

Dialects (paths from the engine's root, ``api_base`` without ``/v1``):

- ``vllm``: ``POST /v1/load_lora_adapter {"lora_name", "lora_path"}`` and
  ``POST /v1/unload_lora_adapter {"lora_name"}``; they exist only when vLLM runs with
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` (else 404). Errors are vLLM's ``ErrorResponse``.
- ``sglang``: ``POST /load_lora_adapter`` and ``/unload_lora_adapter``, same bodies; the
  answer is ``{"success", "error_message", "loaded_adapters"}`` (400 when refused).
- ``llamacpp``: mol's local engine, which serves vLLM's two routes with vLLM's answers.

An adapter's LoRA is registered under its versioned name (``NAME@<12 hex>``,
``HCP.engine_name``) and never reloaded in place: a name the engine already lists is left
alone. Whether a LoRA has requests in flight comes from vLLM's ``vllm:lora_requests_info``
gauge on ``/metrics`` (None where the engine does not say).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from mol.core.errors import EngineConnectionError, EngineResponseError
from mol.hcp.loras import local_path
from mol.runtime.engine.adapters_check import list_models
from mol.runtime.engine.http import http_client

ROUTES = {"vllm": ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"),
          "sglang": ("/load_lora_adapter", "/unload_lora_adapter"),
          "llamacpp": ("/v1/load_lora_adapter", "/v1/unload_lora_adapter")}
"""Each dialect's load and unload paths, from the engine's root."""

_UPDATING_OFF = {
    "vllm": "runtime LoRA updating is off: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True",
    "sglang": "the engine has no /load_lora_adapter (is it SGLang? engine.lora_api says so)",
    "llamacpp": "the engine has no /v1/load_lora_adapter (is it mol's local engine, "
                "mol engine local? engine.lora_api says so)",
}
"""What a 404 from the load route means, per dialect."""

GAUGE = "vllm:lora_requests_info"
_SAMPLE = re.compile(r"^" + re.escape(GAUGE) + r"\{(?P<labels>.*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ServedModel:
    """One entry of the engine's ``GET /v1/models``: a LoRA has a ``parent`` (the base)."""

    id: str
    root: str | None = None
    parent: str | None = None


def lora_path(artifact: Any, adapter: str) -> str | None:
    """Where the engine reads an adapter's LoRA: the absolute path of a local file or folder,
    else the URI as written; None for an adapter without a ``lora``."""
    config = artifact.doc.adapters[adapter].lora
    if config is None:
        return None
    where = local_path(artifact.base_dir, config.path)
    return config.path if where is None else str(where)


class LoraClient:
    """Speaks one engine's LoRA dialect; every call opens its own short-lived client."""

    def __init__(self, api_base: str, dialect: str, *, api_key: str | None = None,
                 timeout: float = 60.0) -> None:
        self.api_base = api_base.rstrip("/")
        self.root = self.api_base.removesuffix("/v1")
        self.dialect = dialect
        self.api_key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = timeout

    @classmethod
    def from_artifact(cls, artifact: Any, engine_url: str | None = None) -> LoraClient:
        """The client of the engine an artifact names (``engine_url`` or ``MOL_ENGINE_URL``
        override its ``api_base``), in its ``lora_api`` dialect."""
        config = artifact.doc.engine
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        return cls(engine_url or os.environ.get("MOL_ENGINE_URL") or config.api_base,
                   config.lora_api, api_key=api_key, timeout=config.timeout_sec)

    async def served(self) -> list[ServedModel]:
        """What the engine serves (``GET /v1/models``, read as the adapter check reads it:
        ``mol.runtime.engine.adapters_check.list_models``, with its errors)."""
        listed = await list_models(self.api_base, self.api_key, self.timeout)
        return [ServedModel(str(entry["id"]), entry.get("root"), entry.get("parent"))
                for entry in listed if "id" in entry]

    async def load(self, name: str, path: str) -> None:
        """Load the LoRA at ``path`` under ``name``; ``EngineResponseError`` with the engine's
        reason when it refuses."""
        await self._update(ROUTES[self.dialect][0], {"lora_name": name, "lora_path": path},
                           name)

    async def unload(self, name: str) -> None:
        """Unload the LoRA ``name``; ``EngineResponseError`` with the engine's reason when it
        refuses (one it does not hold, for instance)."""
        await self._update(ROUTES[self.dialect][1], {"lora_name": name}, name)

    async def in_use(self, name: str) -> bool | None:
        """Whether the engine reports requests running or waiting for LoRA ``name``, from
        vLLM's ``vllm:lora_requests_info`` (its newest series); None when it does not say."""
        try:
            response = await self._send("GET", f"{self.root}/metrics")
        except EngineConnectionError:
            return None
        if response.status_code != 200 or f"{GAUGE}" not in response.text:
            return None
        newest: tuple[float, dict[str, str]] | None = None
        for line in response.text.splitlines():
            match = _SAMPLE.match(line)
            if match is None:
                continue
            try:
                value = float(match["value"])
            except ValueError:
                continue
            if newest is None or value > newest[0]:
                newest = (value, dict(_LABEL.findall(match["labels"])))
        if newest is None:
            return False
        labels = newest[1]
        active = {n for key in ("running_lora_adapters", "waiting_lora_adapters")
                  for n in labels.get(key, "").split(",") if n}
        return name in active

    async def _update(self, path: str, body: dict[str, str], name: str) -> None:
        response = await self._send("POST", f"{self.root}{path}", body)
        if response.status_code == 200 and self._succeeded(response):
            return
        if response.status_code == 404 and path == ROUTES[self.dialect][0] and (
                _reason(response) in ("Not Found", "")):
            reason = _UPDATING_OFF[self.dialect]
        else:
            reason = _reason(response)
        raise EngineResponseError(f"the engine refused {name}: {reason}", response.status_code)

    def _succeeded(self, response: Any) -> bool:
        if self.dialect != "sglang":
            return True
        try:
            return response.json().get("success") is True
        except (ValueError, AttributeError):
            return False

    async def _send(self, method: str, url: str, body: dict[str, str] | None = None) -> Any:
        import httpx

        try:
            async with http_client(url, self.timeout) as client:
                return await client.request(method, url, json=body, headers=self.headers)
        except httpx.TimeoutException as exc:
            raise EngineConnectionError(f"{method} {url}: no answer within {self.timeout:g} s"
                                        ) from exc
        except httpx.HTTPError as exc:
            raise EngineConnectionError(f"{method} {url}: {exc or type(exc).__name__}") from exc


def _reason(response: Any) -> str:
    """The engine's own words in an error answer: vLLM's ``error.message`` (or an older
    flat ``message``), SGLang's ``error_message``, FastAPI's ``detail``, else the text."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        for key in ("error_message", "message", "detail"):
            if isinstance(body.get(key), str) and body[key]:
                return body[key]
    return response.text.strip()
