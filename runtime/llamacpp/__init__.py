"""The embedded local engine: llama.cpp serving one GGUF model as every adapter.

``supervisor`` starts, watches and stops the engine process (``mol engine
local``, and ``engine.kind = "local"`` artifacts); ``server`` is the program it
runs, llama-cpp-python's OpenAI-compatible server adjusted for MoL; ``models``
its model entries and vLLM's runtime LoRA endpoints; ``contexts`` each adapter's
llama.cpp context with its LoRA; ``timings`` what each request evaluated.
"""
