"""Turn scheduling: the runner, its jobs, admission, leases, suspended elicitations,
marks and seeding. It raises ``MolError``s only: the HTTP room maps them to statuses."""
