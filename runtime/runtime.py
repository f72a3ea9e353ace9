"""The runtime of one artifact: what every conversation shares, opened once.

A ``Runtime`` holds the artifact, the engine, the plugins, the toolsets (MCP servers), the
warm sandbox pool, the command hooks and the tracer (when tracing is on). It knows which
tools an adapter sees and what its system prompt is; it runs no turn itself: ``session()``
gives the object that runs one conversation's turns (``mol.runtime.session.Session``).
``open_runtime`` (``mol.runtime.app``) opens one with everything it needs and closes it all
at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mol.core.tools import Tool, Toolset, ToolWrapper, with_tool
from mol.hcp.loader import Artifact
from mol.runtime import lifecycle
from mol.runtime.engine import Engine, LiteLLMEngine
from mol.runtime.hooks import ToolHooks
from mol.runtime.policy import visible
from mol.runtime.session import Session
from mol.runtime.windows import Windows


class Runtime:
    """What the conversations of one artifact share; ``session()`` runs one of them."""

    def __init__(self, artifact: Artifact, *, engine: Engine | None = None,
                 engine_url: str | None = None, plugins: Any = None,
                 toolsets: Sequence[Toolset] = (), sandbox_pool: Any = None,
                 tracer: Any = None) -> None:
        if plugins is None:
            from mol.plugins.manager import PluginManager

            plugins = PluginManager.for_artifact(artifact)
        self.artifact = artifact
        self.tracer = tracer
        """The ``mol.runtime.tracing`` tracer the sessions' turns are traced with, or None."""
        engine = engine or LiteLLMEngine.from_artifact(artifact, engine_url)
        self.engine = engine if tracer is None else tracer.engine(engine, artifact)
        self.plugins = plugins
        self.toolsets = list(toolsets)
        self.sandbox_pool = sandbox_pool
        """A warm ``SandboxPool`` sessions take their sandbox from, when one is open."""
        self.hook_sets = lifecycle.hook_sets(artifact)
        """The command hooks: the artifact's own and those of the bundles in use."""
        self.tool_hooks = ToolHooks.of(plugins.hook)
        """The plugins' hooks around each tool call."""
        self.windows = Windows(artifact, self.engine)
        """Each adapter's context window (``mol.runtime.windows``)."""

    def session(self, conversation: Any = None, **options: Any) -> Session:
        """A ``Session`` running ``conversation``'s turns (a new conversation when None);
        ``options`` are ``Session``'s."""
        return Session(self, conversation, **options)

    async def all_tools(self, adapter: str, wrapper: ToolWrapper | None = None,
                        extra: Sequence[Toolset] = ()) -> dict[str, Tool]:
        """Every tool for ``adapter`` before policy: plugins, then toolsets, then a session's
        ``extra`` toolsets (``wrapper`` applied last).

        A name offered by two sources is a ``ToolError`` naming both: one of them
        silently shadowing the other would run a tool nobody chose."""
        tools = dict(self.plugins.tools)
        for toolset in [*self.toolsets, *extra]:
            for tool in await toolset.tools(adapter):
                with_tool(tools, tool, in_place=True)
        return tools if wrapper is None else wrapper(adapter, tools)

    async def tools_for(self, adapter: str) -> dict[str, Tool]:
        """The tools ``adapter`` may see and call, by its policy."""
        return self.by_policy(adapter, await self.all_tools(adapter))

    def by_policy(self, adapter: str, tools: dict[str, Tool]) -> dict[str, Tool]:
        """The ``tools`` ``adapter``'s policy lets it see."""
        config = self.artifact.doc.adapter(adapter)
        return {name: tool for name, tool in tools.items() if visible(name, config)}

    def system_prompt(self, adapter: str, tools: dict[str, Tool]) -> str:
        """The adapter's system prompt: its prompt, tool list and skill catalog, in a stable
        order and with nothing that changes between requests."""
        config = self.artifact.doc.adapter(adapter)
        parts = [self.artifact.prompt(f"adapters.{adapter}.prompt").strip()]
        if tools:
            lines = [f"- {name}: {tools[name].description.splitlines()[0]}"
                     for name in sorted(tools)]
            parts.append("# Tools\n" + "\n".join(lines))
        if config.skills:
            from mol.plugins.catalog import catalog_text

            catalog = catalog_text(self.artifact, adapter)
            if catalog:
                parts.append(catalog)
        parts.append(self.artifact.prompt("model.identity").strip())
        return "\n\n".join(p for p in parts if p)
