"""What a run (or a stored session) leaves behind, in the formats other tools read:
Harbor's ATIF trajectories (``atif``), chat-format training data per adapter (``sft``,
``examples``; ``sessions`` for stored sessions), both read from a run folder through
``source``, which also checks where they are written. See docs/eval.md, "Exports"."""
