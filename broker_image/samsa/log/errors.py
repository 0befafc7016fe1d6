"""Exceptions raised by the log layer; each maps to one Kafka error code."""

from __future__ import annotations

import errno


class OffsetOutOfRangeError(Exception):
    """The offset is below the log start offset or beyond the log end offset."""


class UnexpectedAppendOffsetError(ValueError):
    """A follower append starting below the log end offset."""


class OffsetsOutOfOrderError(ValueError):
    """Replicated batches whose offsets do not increase."""


class InvalidOffsetError(ValueError):
    """An index append that would break the index's ordering."""


def out_of_space(exc: OSError) -> bool:
    """A full disk (or quota): the write can be tried again once there is room, unlike an
    I/O error."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)
