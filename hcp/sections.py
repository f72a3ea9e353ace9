"""The tool-side sections of the HCP artifact: plugins, hooks, skills, bundles, the sandbox,
session storage and telemetry; MCP servers live in ``mol.hcp.mcp`` (``mol.hcp.schema`` assembles the
document)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mol.hcp.base import Model, PositiveFloat
from mol.hcp.egress import check_policy
from mol.hcp.mcp import MCPServerConfig

__all__ = ["MCPServerConfig"]  # defined in mol.hcp.mcp, re-exported with the other sections


class PluginsConfig(Model):
    """Which installed plugins (entry points of group ``mol``) load."""

    load: list[str] | None = None
    """Entry-point names to load; when set, nothing else autoloads. Unset: all installed."""


class CommandHook(Model):
    """A command run at a hook event, with the event as JSON on stdin (Claude Code's fields).
    Words of ``command`` that contain a ``/`` and are not absolute are files relative to the
    artifact."""

    type: Literal["command"] = "command"
    """Hook kind; only ``command`` exists (Claude Code's ``http``, ``prompt`` and ``agent``
    hooks are reported, not run)."""
    command: str = Field(min_length=1)
    """Command line, split like a shell would (no shell runs it)."""
    timeout: PositiveFloat = 60.0
    """Seconds the hook may take."""
    on_error: Literal["block", "allow"] = "block"
    """What a crash or timeout of the hook means for the tool call or the prompt (at
    ``Stop``, ``SubagentStop`` and the events that cannot block, a failure never blocks)."""


class HookMatcher(Model):
    """Hooks that run when the event's subject matches ``matcher``."""

    matcher: str = "*"
    """Glob (``*`` or empty: everything; ``|`` separates alternatives) over the tool name
    (``PreToolUse``, ``PostToolUse``), the session source (``SessionStart``: ``startup`` or
    ``resume``) or the adapter (``SubagentStart``, ``SubagentStop``); ignored by
    ``UserPromptSubmit`` and ``Stop``."""
    hooks: list[CommandHook] = Field(min_length=1)
    """The hooks to run, in order."""

    def globs(self) -> list[str]:
        """The alternatives of ``matcher``; empty when it selects everything."""
        if self.matcher in ("", "*"):
            return []
        return [part.strip() for part in self.matcher.split("|")]


class HooksConfig(Model):
    """Command hooks by event (Claude Code / Codex shape; see docs/hooks.md)."""

    PreToolUse: list[HookMatcher] = Field(default_factory=list)
    """Before a tool runs: may allow, block (exit 2) or rewrite its input."""
    PostToolUse: list[HookMatcher] = Field(default_factory=list)
    """After a tool ran: may block (replacing the result with the reason)."""
    UserPromptSubmit: list[HookMatcher] = Field(default_factory=list)
    """Before a turn is routed: may block it (it then reaches no model) or add context."""
    SessionStart: list[HookMatcher] = Field(default_factory=list)
    """Before a runtime's first turn of a conversation: may add context every adapter sees."""
    Stop: list[HookMatcher] = Field(default_factory=list)
    """When the answering adapter is about to end the turn: may block, so that it goes on
    with the reason as a new instruction (bounded by ``max_steps``)."""
    SubagentStart: list[HookMatcher] = Field(default_factory=list)
    """When the router hands the turn to an adapter: may add context for that adapter."""
    SubagentStop: list[HookMatcher] = Field(default_factory=list)
    """When the turn's summary is handed to the other adapters: may block the hand-off (the
    summary is then kept from them)."""
    PreCompact: list[HookMatcher] = Field(default_factory=list)
    """Before an adapter's view is compacted (matcher: ``manual`` or ``auto``): may block the
    compaction, or add instructions for its summary."""
    PostCompact: list[HookMatcher] = Field(default_factory=list)
    """After an adapter's view was compacted (matcher: ``manual`` or ``auto``): sees the
    sizes before and after; may add nothing."""


class SkillsConfig(Model):
    """Where skills (Agent Skills folders with a ``SKILL.md``) come from."""

    paths: list[str] = Field(default_factory=list)
    """Skill folders, or folders of skill folders, relative to the artifact."""
    builtin: bool = True
    """Include mol's built-in skills."""


class BundlesConfig(Model):
    """Plugin bundles in the Claude Code / Codex layout: a folder with
    ``.claude-plugin/plugin.json`` or ``.codex-plugin/plugin.json`` (optional) and the default
    folders ``skills/``, ``commands/``, ``hooks/hooks.json`` and ``.mcp.json``. Adapters opt
    in by name (``adapters.NAME.bundles``); see docs/hcp.md."""

    paths: list[str] = Field(default_factory=list)
    """Bundle folders, relative to the artifact. A bundle's name is its manifest's ``name``
    (else the folder's name without leading dots)."""


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
    egress: Literal["open", "none", "allowlist"] = "open"
    """What the sandbox may connect to: ``open``, whatever ``network`` reaches (with
    ``bridge``: the internet, the Docker host's bridge address, private ranges); ``none``,
    nothing (the container gets no network, whatever ``network`` says); ``allowlist``,
    only ``egress_allow``, through an HTTP(S) proxy in a gateway container outside the
    sandbox (the sandbox itself sits on an internal network with no route out)."""
    egress_allow: list[str] = Field(default_factory=list)
    """Destinations an ``allowlist`` sandbox may reach: host names (``pypi.org``,
    ``*.pythonhosted.org``), which must resolve to public addresses, and addresses or
    ranges (``192.0.2.7``, ``10.1.0.0/16``, ``[2001:db8::1]``), each optionally with a
    port (``pypi.org:443``, ``10.1.0.0/16:5432``)."""
    acp_client: list[Literal["files", "terminal"]] = Field(default_factory=list)
    """Under ``mol acp``, the tools the editor serves instead of this sandbox, where it offers
    them (docs/acp.md): ``files``, ``read_file``, ``write_file`` and ``edit_file`` through
    the editor's file system (its unsaved buffers included; paths inside the session's
    folder only); ``terminal``, ``terminal`` and ``list_dir`` through the editor's
    terminals: commands then run on the editor's machine, in the session's folder, outside
    any sandbox. Empty (the default): the sandbox serves them all."""

    @model_validator(mode="after")
    def _egress(self) -> SandboxConfig:
        check_policy(self.egress, self.egress_allow, self.network)
        if len(set(self.acp_client)) != len(self.acp_client):
            raise ValueError("acp_client must not repeat a value")
        return self


class SessionConfig(Model):
    """Where conversation state is kept."""

    store: str = "sqlite:///~/.local/state/mol/sessions.db"
    """Session store URL: ``sqlite:///PATH`` (``~`` expands to the home folder), or
    ``postgresql://USER@HOST/DB`` for server replicas sharing one database (needs
    ``pip install 'mol-agent[postgres]'``; the password from the URL or the ``PG*`` variables)."""
    lease: float = Field(default=15.0, ge=1.0, le=3600.0)
    """Seconds a turn's hold on its conversation lasts unless renewed (every third of it,
    while the turn runs). A replica that dies holding one keeps its conversation busy
    (409) until it expires, unless its process is seen gone on this machine."""


class TelemetryConfig(Model):
    """Tracing: OpenTelemetry spans of each turn, its hops and tool calls (GenAI semantic
    conventions), exported over OTLP; needs ``pip install 'mol-agent[otel]'``
    (docs/observability.md). The standard ``OTEL_*`` environment variables override what is
    set here, as in every OpenTelemetry SDK."""

    traces: Literal["none", "otlp"] = "none"
    """``otlp`` exports spans to ``endpoint``; ``none`` (the default) traces nothing unless
    ``OTEL_TRACES_EXPORTER=otlp`` is set."""
    endpoint: str | None = Field(default=None, pattern=r"^https?://")
    """Where the OTLP receiver listens, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` says it (over
    HTTP, ``/v1/traces`` is added); unset: the exporter's default (``http://localhost:4318``
    over HTTP, ``http://localhost:4317`` over gRPC)."""
    protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    """The OTLP transport (``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` /
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` override it)."""
    service_name: str = Field(default="mol", min_length=1)
    """The ``service.name`` of the spans (``OTEL_SERVICE_NAME`` overrides it)."""
    capture_content: bool = False
    """Put message text (prompts, answers, tool arguments and results, commands) in the
    spans; off by default. ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` overrides
    it."""
