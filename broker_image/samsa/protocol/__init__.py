"""Bytes to values and back, no I/O."""
