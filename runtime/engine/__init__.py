"""The model engine boundary: the only package that imports litellm.

mol reaches the MoL engine (vLLM, SGLang, llama.cpp) through ``litellm.acompletion``:
``client`` makes the requests (``LiteLLMEngine``, the routing constraint in the engine's
dialect, retries) and translates litellm's failures into ``EngineError``s; ``loading``
imports litellm (early, off the event loop) and prices the adapters; ``completions``
reads what the engine answers.
"""

from mol.runtime.engine.client import (
    ROUTING_CONSTRAINTS,
    Engine,
    LiteLLMEngine,
    constraint_body,
    translated,
)
from mol.runtime.engine.completions import Completion, Delta, OnDelta, ToolCall, Usage
from mol.runtime.engine.loading import preload, start_import

__all__ = ["ROUTING_CONSTRAINTS", "Completion", "Delta", "Engine", "LiteLLMEngine",
           "OnDelta", "ToolCall", "Usage", "constraint_body", "preload", "start_import",
           "translated"]
