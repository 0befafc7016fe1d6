"""A fault campaign against a local Samsa cluster: a seeded nemesis injects faults while
clients load the cluster and log every operation; an independent checker then judges the
logs and what is readable afterwards (``python -m chaos``; docs/reliability.md)."""
