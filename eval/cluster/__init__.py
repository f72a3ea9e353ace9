"""``mol eval run --ray``: the runner's Ray backend (``backend``), the only ``import ray``
(``ray_backend``), what travels (``payload``), a node's side of an episode (``remote``) and
``mol eval worker`` (``worker``)."""
