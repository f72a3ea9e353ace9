"""Loading litellm: the one ``import litellm`` of mol, started early and off the event loop.

litellm takes seconds to import. ``mol run`` and ``mol chat`` start it in a background
thread on their first line (``start_import``), ``mol serve`` in a worker thread at startup
(``preload``), so the rest of start-up overlaps it. Its network fetch of the model price
list is switched off before the import, and adapters its price list lacks are priced at
zero (``register_unpriced``), so no call runs a failing cost lookup.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def import_litellm() -> Any:
    """litellm, imported (once) with its network fetch and telemetry off."""
    # litellm fetches a price list over the network at import unless told not to.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


_ZERO = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
         "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0,
         "mode": "chat"}


def register_unpriced(litellm: Any, model_ids: list[str]) -> None:
    """Price the adapters at zero where litellm's cost map does not know them. litellm
    computes a cost after every call; for a model it cannot find, that is a failing
    model-info lookup each time (about 2 ms of CPU per call, a fifth of a turn's work).
    It looks both the prefixed id and the bare name up, so both are registered."""
    rows = {}
    for model_id in model_ids:
        provider, _, bare = model_id.rpartition("/")
        for key in (model_id, bare):
            if key not in litellm.model_cost:
                rows[key] = {**_ZERO, "litellm_provider": provider or "openai"}
    if rows:
        # Not added to litellm's provider model sets: that rebuilds them (a tenth of a
        # second) and only serves provider inference, which the prefix already settles.
        litellm.register_model(rows, add_to_provider_model_sets=False)


_importing: list[Any] = []


def start_import() -> None:
    """Start importing litellm in a background thread, at once and once: a command does
    the rest of its start-up (artifact, plugins, MCP servers, sandbox) meanwhile, and its
    first engine call waits only for what is left (Python's import lock makes it wait)."""
    import threading

    if _importing or "litellm" in sys.modules:
        return

    def work() -> None:
        try:
            import_litellm()
        except BaseException:  # the first engine call imports it again and reports why
            pass

    thread = threading.Thread(target=work, name="mol-import-litellm", daemon=True)
    _importing.append(thread)
    thread.start()


async def preload() -> None:
    """Import litellm in a worker thread (seconds of work). A server does this at startup:
    imported by the first turn, on the event loop, it would stall every connection."""
    import anyio.to_thread

    await anyio.to_thread.run_sync(import_litellm)
