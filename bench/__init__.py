"""Samsa's benchmarks: `make bench` (full) and `make bench-quick`; figures printed, never asserted."""
