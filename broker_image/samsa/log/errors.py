"""Exceptions raised by the log layer; each maps to one Kafka error code."""

from __future__ import annotations


class OffsetOutOfRangeError(Exception):
    """The offset is below the log start offset or beyond the log end offset."""


class UnexpectedAppendOffsetError(ValueError):
    """A follower append starting below the log end offset."""


class OffsetsOutOfOrderError(ValueError):
    """Replicated batches whose offsets do not increase."""


class InvalidOffsetError(ValueError):
    """An index append that would break the index's ordering."""
