"""The embedded local engine: llama.cpp serving one GGUF model as every adapter.

``supervisor`` starts, watches and stops the engine process (``mol engine
local``, and ``engine.kind = "local"`` artifacts); ``server`` is the program it
runs, llama-cpp-python's OpenAI-compatible server with mol's two changes.
"""
