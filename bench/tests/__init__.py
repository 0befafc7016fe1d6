"""The harness's own tests: each system starts, takes a small workload and stops cleanly."""
