"""Task suites, results and trajectories: ``mol eval``.

A suite is a folder of task folders (Harbor / Terminal-Bench 2 layout, ``tasks``). Each
episode runs one task in a fresh hardened sandbox (``episode``), through the full harness
or the task's oracle solution, then its verifier (``verifier``); the run keeps one row per
episode in a SQLite store (``store``) and every episode's full record, engine, tool,
sandbox and MCP I/O included (``recording``, ``trajectory``), which ``replay`` re-drives
without a model or Docker. ``runner`` runs a suite in parallel with a progress display;
``stats`` and ``report`` summarize and compare runs. With ``--ray`` the episodes run as
Ray tasks on other machines (``cluster``, ``ray_backend``, ``payload``, ``remote``;
``worker`` sets a node up). ``exports`` writes a run in other tools' formats: Harbor's ATIF
trajectories, one adapter's training data. See docs/eval.md.
"""
