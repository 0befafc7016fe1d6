"""Process start, configuration, wiring, signals and graceful shutdown."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samsa.broker.server import KafkaServer

__all__ = ["KafkaServer"]


def __getattr__(name: str) -> Any:
    # The server loads on first use, so that its light neighbours (properties, listeners) can
    # be imported by the command line and the operator without the whole broker.
    if name == "KafkaServer":
        from samsa.broker.server import KafkaServer

        return KafkaServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
