"""Process start, configuration, wiring, signals and graceful shutdown."""

from samsa.broker.server import KafkaServer

__all__ = ["KafkaServer"]
