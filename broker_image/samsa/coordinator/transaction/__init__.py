"""The transaction coordinator (KIP-98, KIP-447): transactional ids in __transaction_state.

``TransactionCoordinator`` (``coordinator``) is what handlers call; ``TransactionStateManager``
(``state_manager``) holds the loaded partitions; ``TransactionMetadata`` (``metadata``) is one
id's state machine; ``markers`` writes a transaction's markers through the broker's
``MarkerWriter``; ``records`` is the log's format.
"""

from samsa.coordinator.transaction.config import TRANSACTION_STATE_TOPIC_NAME, TransactionConfig
from samsa.coordinator.transaction.coordinator import (
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionCoordinator,
    TransactionDescription,
    TransactionListing,
)
from samsa.coordinator.transaction.markers import MarkerWriter, TxnMarkerEntry
from samsa.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from samsa.coordinator.transaction.state_manager import TransactionStateManager

__all__ = [
    "TRANSACTION_STATE_TOPIC_NAME",
    "InitProducerIdResult",
    "ListTransactionsResult",
    "MarkerWriter",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionDescription",
    "TransactionListing",
    "TransactionMetadata",
    "TransactionState",
    "TransactionStateManager",
    "TxnMarkerEntry",
]
