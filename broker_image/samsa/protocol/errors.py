"""Kafka error codes as ints, and the exception that carries one up to a handler."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class KafkaApiError(Exception):
    """Raised below the handlers; the handler answers with its code (and message if it can)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class CloseConnection(Exception):
    """Raised by a handler when the only right answer is to close this connection."""


__all__ = ["CloseConnection", "ErrorCode", "KafkaApiError"]
