"""How big each adapter's context window is, and how much of it a request fills.

The window of an adapter is ``[adapters.NAME] context_window`` when the artifact sets it,
else what the engine reports for the adapter's engine name (``max_model_len`` in the model
list of vLLM and SGLang; mol's local engine reports its ``n_ctx`` the same way), else
``DEFAULT_WINDOW``. The engine's list is read once per runtime, at the first need: the
first request of at least ``SMALL_REQUEST`` tokens (one smaller fits every window an engine
serves adapters with, and asking costs a request per runtime: per ``mol run``), unless
the adapter check at a command's start read the list already and handed it over
(``Windows.report``): a ``mol run`` then costs that one model-list request in all. An
assumed window compacts like a known one, but a request still too big for it goes to the
engine, which knows better (``mol.runtime.compaction.fit``).

A request's size is estimated from the engine's own count where there is one: the prompt
and reply tokens of the adapter's last request (``Measure``, kept in the conversation),
plus the new messages at the rate of characters per token that request showed (a request
of fewer messages than were measured: all of it at that rate). Without a measurement the
whole request is estimated at ``CHARS_PER_TOKEN`` (a cautious rate: real
tokenizers average 3.5 to 4.5 characters of English per token; JSON punctuation and code
fewer).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_WINDOW = 32768
"""The window of an adapter the artifact does not size and the engine does not report."""
CHARS_PER_TOKEN = 3.0
"""Characters per token of a request nothing was measured for yet."""
SMALL_REQUEST = 1024
"""Tokens below which a request is sent without asking the engine for the window: the
smallest window mol meets (the local engine's 4,096; 2,048 in the tests) fills far later.
An engine with a smaller one answers with its context-length error, which compacts and
retries (``mol.runtime.compaction.fit``)."""


def chars(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """The characters of ``messages`` (and ``tools``) as a request body carries them."""
    size = len(json.dumps(messages, ensure_ascii=False, separators=(",", ":")))
    return size + (len(json.dumps(tools, ensure_ascii=False, separators=(",", ":")))
                   if tools else 0)


@dataclass
class Measure:
    """The engine's count of an adapter's last request: ``tokens`` (its prompt and reply)
    for its first ``messages`` messages (the reply included) of ``chars`` characters, on
    the view after ``compactions`` compactions."""

    tokens: int
    messages: int
    chars: int
    compactions: int

    def to_list(self) -> list[int]:
        """The JSON-able form a conversation keeps."""
        return list(asdict(self).values())


def estimate(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
             measure: Measure | None, compactions: int) -> int:
    """Tokens the request of ``messages`` (with ``tools``) takes, about (see the module
    docstring); ``measure`` counts only while no compaction happened since it was taken."""
    if measure is None or measure.compactions != compactions or measure.tokens <= 0:
        return math.ceil(chars(messages, tools) / CHARS_PER_TOKEN)
    rate = max(1.0, measure.chars / measure.tokens)
    if measure.messages > len(messages):
        # Fewer messages than were measured (the part a compaction summarizes): at the rate
        # the engine showed, not the cautious one, which overstates a view by a third or
        # more and would keep the adapter from summarizing on its own cached prefix.
        return math.ceil(chars(messages, tools) / rate)
    return measure.tokens + math.ceil(chars(messages[measure.messages:]) / rate)


class Windows:
    """The windows of one runtime's adapters (the engine asked once)."""

    def __init__(self, artifact: Any, engine: Any) -> None:
        self.artifact, self.engine = artifact, engine
        self._reported: dict[str, int] | None = None

    async def of(self, adapter: str) -> int:
        """``adapter``'s window, in tokens."""
        doc = self.artifact.doc
        configured = doc.adapter(adapter).context_window
        if configured:
            return configured
        if self._reported is None:
            self._reported = await self._listed()
        return self._reported.get(doc.engine_name(adapter), DEFAULT_WINDOW)

    def unasked(self, adapter: str, size: int) -> bool:
        """Whether a request of ``size`` tokens goes without ``adapter``'s window: it is
        smaller than ``SMALL_REQUEST`` and the window would have to be asked of the engine
        (the artifact does not set it; the engine was not asked yet)."""
        return (size < SMALL_REQUEST and self._reported is None
                and not self.artifact.doc.adapter(adapter).context_window)

    async def known(self, adapter: str) -> bool:
        """Whether ``adapter``'s window is known (set or reported), not ``DEFAULT_WINDOW``
        assumed."""
        if self.artifact.doc.adapter(adapter).context_window:
            return True
        await self.of(adapter)
        return self.artifact.doc.engine_name(adapter) in (self._reported or {})

    def report(self, listed: list[dict[str, Any]] | None) -> None:
        """Take the windows from ``listed``, the engine's model list read already (the
        adapter check at a command's start), so the engine is asked no more."""
        self._reported = _windows(listed)

    async def _listed(self) -> dict[str, int]:
        models = getattr(self.engine, "models", None)
        return _windows(await models() if models is not None else None)


def _windows(listed: list[dict[str, Any]] | None) -> dict[str, int]:
    """Engine name -> ``max_model_len``, of the entries of a model list that report one."""
    found: dict[str, int] = {}
    for entry in listed or []:
        size = entry.get("max_model_len")
        if isinstance(entry.get("id"), str) and isinstance(size, int) and size > 0:
            found[entry["id"]] = size
    return found
