"""The server's HTTP plumbing: auth, transport bounds, idempotency, metrics, bodies, the
error shape and the one mapping of ``MolError``s to HTTP statuses."""
