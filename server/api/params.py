"""The client's sampling parameters, read from either API's body for the answer hop.

Honoured: ``temperature``, ``top_p``, the output budget (Chat ``max_tokens`` /
``max_completion_tokens``, Responses ``max_output_tokens``; the loop clamps it to the
adapter's ``params.max_tokens``), ``stop``, ``seed``, ``tool_choice``,
``parallel_tool_calls``, ``response_format`` (Responses ``text.format``) and the reasoning
effort (Chat ``reasoning_effort``, Responses ``reasoning.effort``), which also switches the
model's thinking on the answer hop (``none``/``minimal``: ``engine.thinking_off``, any other
effort: ``engine.thinking_on``). The route and summary hops keep their own settings. Every value is checked; a wrong one is a 400 naming it.
"""

from __future__ import annotations

from typing import Any

from mol.server.http.bodies import field, json_kind
from mol.server.http.errors import ApiError

TOOL_CHOICES = ("none", "auto", "required")
FORMATS = ("text", "json_object", "json_schema")


def chat_params(body: dict[str, Any]) -> dict[str, Any]:
    """The answer-hop parameters of a Chat Completions body."""
    params = _common(body)
    budget = _count(body, "max_completion_tokens")
    params["max_tokens"] = budget if budget is not None else _count(body, "max_tokens")
    params["stop"] = _stop(body)
    params["seed"] = field(body, "seed", int)
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        function = field(choice, "function", dict, required=True, where="tool_choice.")
        field(function, "name", str, required=True, where="tool_choice.function.")
    params["tool_choice"] = _tool_choice(choice)
    params["response_format"] = _format(field(body, "response_format", dict), "response_format")
    params["reasoning_effort"] = field(body, "reasoning_effort", str)
    return _thinking({k: v for k, v in params.items() if v is not None})


def responses_params(body: dict[str, Any]) -> dict[str, Any]:
    """The answer-hop parameters of a Responses body, in Chat Completions terms."""
    params = _common(body)
    params["max_tokens"] = _count(body, "max_output_tokens")
    choice = body.get("tool_choice")
    if isinstance(choice, dict):  # Responses: {"type": "function", "name": ...}
        name = field(choice, "name", str, required=True, where="tool_choice.")
        choice = {"type": choice.get("type"), "function": {"name": name}}
    params["tool_choice"] = _tool_choice(choice)
    text = field(body, "text", dict, default={})
    params["response_format"] = _responses_format(field(text, "format", dict, where="text."))
    reasoning = field(body, "reasoning", dict, default={})
    params["reasoning_effort"] = field(reasoning, "effort", str, where="reasoning.")
    return _thinking({k: v for k, v in params.items() if v is not None})


def _thinking(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the engine's thinking switch the reasoning effort sets: ``none`` and
    ``minimal`` off (``engine.thinking_off``), any other on (``engine.thinking_on``); the
    effort itself goes to the engine too."""
    from mol.runtime import effort_params

    effort = params.get("reasoning_effort")
    return {**params, **effort_params(effort)} if effort is not None else params


def _common(body: dict[str, Any]) -> dict[str, Any]:
    temperature = field(body, "temperature", (int, float))
    if temperature is not None and not 0 <= temperature <= 2:
        raise ApiError(400, f"'temperature' must be between 0 and 2, got {temperature}",
                       param="temperature")
    top_p = field(body, "top_p", (int, float))
    if top_p is not None and not 0 < top_p <= 1:
        raise ApiError(400, f"'top_p' must be above 0 and at most 1, got {top_p}",
                       param="top_p")
    return {"temperature": temperature, "top_p": top_p,
            "parallel_tool_calls": field(body, "parallel_tool_calls", bool)}


def _count(body: dict[str, Any], name: str) -> int | None:
    value = field(body, name, int)
    if value is not None and value < 1:
        raise ApiError(400, f"'{name}' must be at least 1, got {value}", param=name)
    return value


def _stop(body: dict[str, Any]) -> list[str] | None:
    stop = field(body, "stop", (str, list))
    if isinstance(stop, str):
        return [stop]
    if stop is not None and not all(isinstance(s, str) for s in stop):
        raise ApiError(400, "'stop' must be a string or an array of strings", param="stop")
    return stop


def _tool_choice(choice: Any) -> str | dict[str, Any] | None:
    if choice is None or choice in TOOL_CHOICES:
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice["function"]["name"]}}
    raise ApiError(400, f"'tool_choice' must be one of {', '.join(TOOL_CHOICES)} or a "
                   f"function, got {json_kind(choice) if not isinstance(choice, str) else repr(choice)}",
                   param="tool_choice")


def _format(value: dict[str, Any] | None, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    kind = value.get("type")
    if kind not in FORMATS:
        raise ApiError(400, f"'{where}.type' must be one of {', '.join(FORMATS)}, got {kind!r}",
                       param=f"{where}.type")
    if kind == "json_schema":
        spec = field(value, "json_schema", dict, required=True, where=f"{where}.")
        field(spec, "name", str, required=True, where=f"{where}.json_schema.")
    return None if kind == "text" else value


def _responses_format(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Responses ``text.format`` as a Chat ``response_format`` (the schema moves inside
    ``json_schema``)."""
    if value is None or value.get("type") != "json_schema":
        return _format(value, "text.format")
    name = field(value, "name", str, required=True, where="text.format.")
    schema = field(value, "schema", dict, required=True, where="text.format.")
    spec: dict[str, Any] = {"name": name, "schema": schema}
    if isinstance(value.get("strict"), bool):
        spec["strict"] = value["strict"]
    return {"type": "json_schema", "json_schema": spec}
