"""The client side of the protocol in SDK terms: callbacks over ``answers``, notifications.

``client_options`` gives ``mcp.Client`` its sampling (only when the HCP offers
it), elicitation, roots and logging callbacks; each turns the SDK's params into
plain JSON for ``mol.runtime.mcp.answers`` and the answer back into the SDK's
result, a ``Refusal`` or an engine failure into an error the server reads.
``notice`` names the change notifications mol acts on.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from mol.core.errors import EngineError
from mol.runtime.mcp.answers import Refusal

logger = logging.getLogger("mol.mcp")


def _plain(params: Any) -> dict[str, Any]:
    return params.model_dump(mode="json", by_alias=True, exclude_none=True)


def client_options(answers: Any) -> dict[str, Any]:
    """``mcp.Client`` keyword arguments answering server requests through ``answers``."""
    import mcp_types as types

    async def sampling(context: Any, params: Any) -> Any:
        try:
            return types.CreateMessageResult.model_validate(await answers.sample(_plain(params)))
        except Refusal as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=str(exc))
        except EngineError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the model failed: {exc}")

    async def elicitation(context: Any, params: Any) -> Any:
        try:
            answer = await answers.elicit(_plain(params))
        except Refusal as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=str(exc))
        try:
            return types.ElicitResult.model_validate(answer)
        except ValidationError as exc:  # values the protocol cannot carry (a nested object)
            logger.warning("an elicitation answer the protocol cannot carry, sent as cancel: "
                           "%s", exc.errors()[0]["msg"])
            return types.ElicitResult(action="cancel")

    async def roots(context: Any) -> Any:
        return types.ListRootsResult.model_validate({"roots": answers.roots()})

    async def log(params: Any) -> None:
        answers.log(_plain(params))

    options: dict[str, Any] = {"elicitation_callback": elicitation, "list_roots_callback": roots,
                               "logging_callback": log, "log_level": answers.config.log_level}
    if answers.samples:
        options["sampling_callback"] = sampling
    return options


def notice(message: Any) -> str | None:
    """What a server notification says changed: ``tools``, ``resources``, ``prompts``,
    ``resource:<uri>``, or None."""
    from mcp import types

    if isinstance(message, types.ToolListChangedNotification):
        return "tools"
    if isinstance(message, types.ResourceListChangedNotification):
        return "resources"
    if isinstance(message, types.PromptListChangedNotification):
        return "prompts"
    if isinstance(message, types.ResourceUpdatedNotification):
        return f"resource:{message.params.uri}"
    return None
