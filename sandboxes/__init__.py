"""Docker sandboxes: long-lived hardened containers with a persistent shell."""
