"""Samsa's benchmarks: `make bench` (full) and `make bench-quick`; printed, never asserted."""
