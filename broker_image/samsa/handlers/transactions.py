"""What the transaction handlers share: the coordinator, and Kafka's downgrade of
PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for clients that predate it (KIP-588)."""

from __future__ import annotations

from samsa.coordinator.transaction import TransactionCoordinator
from samsa.handlers.context import BrokerServices
from samsa.protocol.errors import ErrorCode


def transaction_coordinator(services: BrokerServices) -> TransactionCoordinator | None:
    """The transaction coordinator, or None while the broker is still starting it."""
    tc = services.transaction_coordinator
    return tc if tc is not None and tc.is_active else None


def fenced_for(version: int, first_with_producer_fenced: int, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED is only sent from the version that introduced it."""
    if error is ErrorCode.producer_fenced and version < first_with_producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return error
