"""Each adapter's llama.cpp context, built over the memory-mapped base model, with its LoRA.

``Llama(lora_path=...)`` turns memory mapping off (a precaution from when llama.cpp merged a
LoRA into the weights; it has applied them in the graph since llama.cpp#8332), so each LoRA
entry would hold its own copy of the base in memory. Here every entry maps the same base
file and the LoRA is applied to its context afterwards: an entry with a LoRA costs its
context and the LoRA's tensors, not another base. ``mol.runtime.llamacpp.server`` builds
the entries it starts with and those ``/v1/load_lora_adapter`` adds with ``load_entry``.
"""

from __future__ import annotations

from typing import Any

from mol.runtime.llamacpp.models import NotALora


def _with_lora(llama: Any, path: str) -> Any:
    """``llama`` with the GGUF LoRA at ``path`` applied to its context (closed, and
    ``NotALora`` raised, when llama.cpp refuses the file: not a LoRA, or another base's)."""
    import ctypes

    import llama_cpp

    adapter = llama_cpp.llama_adapter_lora_init(llama._model.model, path.encode())
    if not adapter:  # a NULL pointer (ctypes gives a false pointer object, not None)
        llama.close()
        raise NotALora(f"{path} is not a GGUF LoRA of this engine's base model (llama.cpp "
                       "refused it: its architecture or tensor shapes differ; the engine's "
                       "log says which)")
    llama._stack.callback(llama_cpp.llama_adapter_lora_free, adapter)  # runs before the model's
    kind = _adapter_meta(adapter, "general.type"), _adapter_meta(adapter, "adapter.type")
    if kind != ("adapter", "lora"):  # llama.cpp takes any GGUF, a whole model too, as no-op
        llama.close()
        raise NotALora(f"{path} is not a LoRA adapter (its general.type is {kind[0]!r}, its "
                       f"adapter.type {kind[1]!r}; a LoRA's are 'adapter' and 'lora')")
    adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(adapter)
    scales = (ctypes.c_float * 1)(1.0)
    llama._mol_lora = (adapters, scales)  # alive as long as the context
    if llama_cpp.llama_set_adapters_lora(llama._ctx.ctx, adapters, 1, scales):
        llama.close()
        raise NotALora(f"{path}: llama.cpp could not apply it to the context")
    llama.lora_path = path
    return llama


def _adapter_meta(adapter: Any, key: str) -> str | None:
    """A string of a LoRA file's GGUF metadata, as llama.cpp read it; None when absent."""
    import ctypes

    import llama_cpp

    buf = ctypes.create_string_buffer(256)
    if llama_cpp.llama_adapter_meta_val_str(adapter, key.encode(), buf, len(buf)) < 0:
        return None
    return buf.value.decode(errors="replace")


def load_entry(settings: Any) -> Any:
    """The model entry ``settings`` describes. The LoRA, if any, is applied to a context over
    the memory-mapped base: given to ``Llama`` itself, it would turn memory mapping off (a
    precaution from when llama.cpp merged LoRAs into the weights) and copy the base into each
    LoRA entry's memory."""
    from llama_cpp.server.model import LlamaProxy

    llama = LlamaProxy.load_llama_from_model_settings(settings.model_copy(
        update={"lora_path": None}))
    return _with_lora(llama, settings.lora_path) if settings.lora_path else llama
