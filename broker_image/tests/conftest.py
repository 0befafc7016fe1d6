"""Shared helpers for the broker's tests."""

from __future__ import annotations

from kafka_support import wait_until

__all__ = ["wait_until"]
