"""``mol evolve``: propose HCP edits, evaluate only the slice they can affect, promote the
ones an honest gate accepts, and keep the lineage.

- ``document``: the evolve document of an artifact (defaults filled in, prompt files and
  skill files inline as text), the pointers two documents differ at;
- ``materialize``: a patched document back into an artifact folder (TOML and changed files);
- ``slice``: which tasks of a recorded run an edit can affect (reads, then replay);
- ``proposers``: candidates from a file or from an adapter, validated;
- ``gate``: guards, the sign test or the clustered interval, the minimum effect, the cost;
- ``lab``: the folder that keeps candidates, their runs, evaluations and promotions;
- ``evaluate``: run the slice under a candidate, inherit the rest, apply the gate;
- ``loop``: ``mol evolve run``, rounds of propose, evaluate and promote within a budget.

See docs/evolve.md.
"""
