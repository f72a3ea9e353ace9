"""The HCP sections about the adapter population and the hops around it: the router, each
adapter, the summary hop, how views show other adapters' turns, and the public model.

Adapters are a population: ``[adapters.NAME]`` declares any number of them (the seed
artifacts' L0..L3 are examples, not a fixed set). Every other section that names an
adapter is checked against the declared names when the artifact loads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from mol.hcp.base import AdapterName, Model, Prompt

ANSWERING = "answering"
"""``summary.adapter`` value: the adapter that answered the turn writes its summary."""

PUBLIC_MODEL = "{{MODEL_NAME}}"
"""A ``server.model_aliases`` target standing for the public model, whatever its name."""


class RouterConfig(Model):
    """The routing hop: which adapter answers the turn."""

    prompt: Prompt
    """The router prompt. It may use ``{{ADAPTER_DESCRIPTIONS}}`` (or its synonym
    ``{{LORA_DESCRIPTIONS}}``, the reference proxy's name) and ``{{ROUTE_LABELS}}`` (see
    ``layout`` for where the user's turn goes)."""
    descriptions: Prompt | None = None
    """A file of adapter descriptions in the reference proxy's ``lora.md`` form: a ``## NAME``
    heading per adapter, its ``### Description`` section below (``mol hcp import --from
    mol-harness`` names the profile's own file). Each description found there stands for that
    adapter's ``description`` in ``{{ADAPTER_DESCRIPTIONS}}``; an adapter's own
    ``description`` wins."""
    labels: list[AdapterName] | None = Field(default=None, min_length=1)
    """The labels the router may answer; the engine is constrained to exactly one of them.
    Unset: every declared adapter, in name order."""
    adapter: AdapterName = "L0"
    """The adapter that routes (it must be declared)."""
    max_tokens: int = Field(default=24, ge=1, le=256)
    """Token budget of the routing reply."""
    fallback: AdapterName | None = None
    """Adapter used when the router answers no valid label, nothing, or fails. Unset: the
    first label."""
    unavailable_fallback: AdapterName | None = None
    """Adapter that answers instead, once, when the engine says a routed adapter is not loaded
    (or not found). Unset: ``fallback``."""
    layout: Literal["system", "prefill"] = "system"
    """``system``: the router prompt is the system message and the turn follows as a user
    message, quoted as untrusted text. ``prefill``: one user message holds the quoted turn, a
    blank line and the router prompt without its last line; that last line (e.g.
    ``model_id=``) is sent as an assistant prefill the engine continues
    (``continue_final_message``), the layout the Macaron router adapter was trained on."""
    quote_turn: bool = True
    """Quote the turn as untrusted text (``<untrusted_turn>`` tags) in the routing request.
    False sends the turn as the user wrote it (whitespace trimmed), as the reference MoL proxy
    does, whose route prompt itself tells the router to treat the text above it as quoted;
    only the route hop is concerned (the answer hop always gets the turn unquoted)."""
    thinking: bool = False
    """Let a reasoning model think on the routing hop. False sends ``engine.thinking_off``
    (with a reasoning parser on, a thinking router would put its label in
    ``reasoning_content`` and leave the reply empty)."""
    speculate: Literal["off", "sticky"] = "off"
    """``off``: the answer hop starts once the route is known. ``sticky``: the answer hop on
    the conversation's last adapter starts at the same time as the route hop; when the route
    agrees, that answer goes on (its first token as if there were no route hop), else it is
    cancelled unseen and the routed adapter answers. Costs one cancelled request per
    switch of adapter."""

    @field_validator("labels")
    @classmethod
    def _unique(cls, labels: list[str] | None) -> list[str] | None:
        if labels is not None and len(set(labels)) != len(labels):
            raise ValueError("labels must not repeat")
        return labels


class ModelParams(Model):
    """Sampling parameters passed to the engine for one adapter."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature (a client's ``temperature`` replaces it)."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Nucleus sampling mass (a client's ``top_p`` replaces it)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Maximum tokens of one model reply; a client's ``max_tokens`` is clamped to it."""
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


class CompactionConfig(Model):
    """How a view is kept within its adapter's context window (``mol.runtime.compaction``):
    when a request would fill more than ``threshold`` of the window, the older part of the
    view is replaced by a summary, the recent part kept verbatim."""

    mode: Literal["compact", "error", "off"] = "compact"
    """``compact``: compact the view before a request would outgrow the window (and once
    more, then retry, when the engine answers that a request was too long). ``error``: refuse
    the turn before the engine is called, naming the adapter, its window and the view's
    size. ``off``: send the view as it is (the engine's error reaches the client)."""
    threshold: float = Field(default=0.8, gt=0, le=1)
    """The fraction of the window a request may fill (prompt plus the reply's budget) before
    the view is compacted."""
    keep_recent_tokens: int | None = Field(default=None, ge=0)
    """Tokens of the view's most recent messages kept verbatim (whole tool steps: a call is
    never separated from its results). Unset: a quarter of the window."""
    adapter: AdapterName | None = None
    """The adapter that writes the compaction. Unset: the adapter whose view it is, from its
    own view (its cached prefix is reused); another adapter reads the compacted part as
    text."""
    prompt: Prompt | None = None
    """Instructions for the compaction; a built-in prompt is used when unset."""
    max_tokens: int = Field(default=512, ge=16, le=8192)
    """Token budget of the compaction's summary."""


class AdapterCompaction(Model):
    """One adapter's compaction settings; each key unset here takes ``[compaction]``'s."""

    mode: Literal["compact", "error", "off"] | None = None
    """As ``[compaction] mode``, for this adapter."""
    threshold: float | None = Field(default=None, gt=0, le=1)
    """As ``[compaction] threshold``, for this adapter."""
    keep_recent_tokens: int | None = Field(default=None, ge=0)
    """As ``[compaction] keep_recent_tokens``, for this adapter."""
    adapter: AdapterName | None = None
    """As ``[compaction] adapter``, for this adapter."""
    prompt: Prompt | None = None
    """As ``[compaction] prompt``, for this adapter."""
    max_tokens: int | None = Field(default=None, ge=16, le=8192)
    """As ``[compaction] max_tokens``, for this adapter."""


class LoraConfig(Model):
    """An adapter's LoRA weights, for an engine mol registers them with at runtime
    (``engine.lora_api``) or launches (``mol engine command``). The adapter is served under
    the versioned name ``NAME@<first 12 hex of sha256>`` (``NAME``: its ``engine_name``);
    a new version of the weights is a new name, never a reload in place (docs/adapters.md)."""

    path: str = Field(min_length=1)
    """Where the engine reads the LoRA: a PEFT folder or a file (a GGUF file for the local
    engine), relative to the artifact or absolute, or a URI the engine can read."""
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """The LoRA's content hash (of a file's bytes; of a folder's files: ``mol adapters hash
    PATH``). Checked against ``path`` when mol can read it; unset, computed from it; required
    when mol cannot read it (a URI, or a path on the engine's machine)."""


class AdapterConfig(Model):
    """One LoRA specialist."""

    description: str | None = None
    """What the adapter is for, in one line: the router prompt's ``{{ADAPTER_DESCRIPTIONS}}``
    lists it (required for routable adapters when the router prompt uses it)."""
    engine_name: str | None = Field(default=None, min_length=1)
    """The engine's name of this LoRA when it differs from the adapter's name; the litellm
    model id is ``engine.model_prefix`` + this."""
    lora: LoraConfig | None = None
    """The adapter's LoRA weights and their hash. Unset: the engine already serves the
    adapter under its ``engine_name`` (mol only checks that it does)."""
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
    keep_reasoning: bool = False
    """Keep the engine's reasoning in this adapter's own view (as ``reasoning_content`` on its
    assistant messages). False drops it, so the view is the same whatever the engine thinks;
    clients receive the reasoning either way."""
    context_window: int | None = Field(default=None, ge=256)
    """Tokens of this adapter's context window. Unset: what the engine reports for it
    (``max_model_len`` in vLLM's and SGLang's ``/v1/models``; the local engine's ``n_ctx``),
    else 32768."""
    compaction: AdapterCompaction | None = None
    """This adapter's compaction settings, over ``[compaction]``'s."""


class SummaryConfig(Model):
    """The summary hop: a short cross-adapter record of each turn, kept runtime-side."""

    enabled: bool = True
    """Write a summary after each turn (otherwise a plain truncated record is stored)."""
    adapter: str = Field(default=ANSWERING, pattern=r"^(answering|[A-Za-z][A-Za-z0-9_-]{0,31})$")
    """``answering``: the adapter that answered the turn writes its own summary; or the name
    of the one adapter that writes every summary."""
    prompt: Prompt | None = None
    """Instructions for the summary; a built-in prompt is used when unset."""
    max_tokens: int = Field(default=128, ge=1, le=4096)
    """Token budget of the summary."""
    input: Literal["text", "trace"] = "text"
    """What the summary hop reads: ``text``, the turn flattened to plain text; ``trace``, the
    turn's messages (user message, tool calls and results, answer), long contents cut."""
    skip: list[AdapterName] = Field(default_factory=list)
    """Adapters whose turns get no summary hop (a plain truncated record is kept instead)."""
    thinking: bool = False
    """Let a reasoning model think on the summary hop; false sends ``engine.thinking_off``."""
    when: Literal["eager", "deferred"] = "eager"
    """``deferred``: the turns not summarized yet form a segment, summarized in one request
    only when another adapter is about to answer or when the conversation goes idle (see
    ``idle_after``). ``eager``: one summary request after every turn, behind its reply (a
    switch of adapter never waits for a summary, at a request per turn). Turns of ``skip``
    adapters keep their plain record at once either way."""
    idle_after: float = Field(default=60.0, ge=0, le=86400)
    """With ``deferred``: seconds without a new turn after which ``mol serve`` summarizes a
    conversation's open segment in the background, so that the next switch of adapter does
    not wait for it (0: only when another adapter is about to answer); ``mol chat
    --session`` summarizes it at exit."""


class ViewsConfig(Model):
    """How an adapter's view shows the turns other adapters handled."""

    others: Literal["summary", "user+summary"] = "summary"
    """``summary``: their summaries in one context message before the adapter's next user
    message. ``user+summary``: each such turn as its original user message followed by an
    assistant message carrying its summary. Views stay append-only either way."""


class PublicModelConfig(Model):
    """The model clients see: its name, its base, and the identity it keeps."""

    name: str = Field(default="mol", min_length=1, max_length=128, pattern=r"^[^\s/]+$")
    """The public model id (e.g. ``Macaron-V1-Venti``): ``/v1/models`` lists it, requests name
    it; prompts may use it as ``{{MODEL_NAME}}``."""
    base: str | None = None
    """The base model the adapters were trained on (e.g. ``GLM-5.2``); ``{{BASE_MODEL}}``."""
    identity: Prompt | None = None
    """Identity prompt appended to the first system message of every answer and summary
    request (never of a route request)."""


class ServingConfig(Model):
    """What ``mol serve`` shows clients, and how it queues their turns."""

    expose_adapters: bool = False
    """List the adapters in ``/v1/models`` beside the public model and let a request name
    one to pin it (skipping the route hop). False: only the public model exists."""
    model_aliases: dict[str, str] = Field(default_factory=lambda: {"claude-*": PUBLIC_MODEL})
    """Model names clients send that are not served models, mapped onto one: clients that
    name their vendor's models (Claude Code names Anthropic's: its default model, and a small
    fast one for background work) run unchanged. A key is a name or a glob (``*``, ``?``,
    ``[...]``); an exact key wins, then the first glob that matches, in order. A value is the
    public model (its name, or ``{{MODEL_NAME}}``: the turn is routed) or an adapter (the turn
    is pinned to it, whether or not ``expose_adapters`` lists it). Setting the table
    replaces the default, which runs every ``claude-*`` name on the public model."""
    queue: int = Field(default=512, ge=0, le=65536)
    """Turns that may wait, first come first served, for one of the ``--max-turns`` slots;
    one more is refused with 429 and ``Retry-After``. 0: refuse at once when the slots are
    taken. ``mol serve --queue`` overrides it."""
    queue_wait: float = Field(default=60.0, gt=0, le=3600)
    """Seconds a turn may wait in the queue; then it is refused with 429 and
    ``Retry-After``. ``mol serve --queue-wait`` overrides it."""
    approval_timeout_sec: float = Field(default=3600.0, gt=0, le=7 * 24 * 3600)
    """Seconds a call of an ``ask`` tool waits for the API client's approval
    (``mcp_approval_response``, or the ``mol_approval`` tool's result), the turn stored
    meanwhile; then it is denied and the turn goes on. ``[mcp_servers.NAME]
    approval_timeout_sec`` sets it for that server's tools (docs/approvals.md)."""
