"""The transaction coordinator (KIP-98, KIP-447): transactional ids in __transaction_state.

``TransactionCoordinator`` (``coordinator``) is what handlers call, and what it answers is in
``results``; each request's steps are a module: ``init_producer_id``, ``add_partitions``
(AddPartitionsToTxn, and AddOffsetsToTxn through it) and ``end_txn`` (EndTxn, then the markers
and the transaction's completion), and the periodic aborts and expiry are ``timeouts``.
``TransactionMetadata`` (``metadata``) is one id's state machine; ``TransactionStateManager``
(``state_manager``) holds the loaded partitions and writes each transition to the log before it
takes effect; ``transaction_log`` is the log's records codec; ``markers`` writes a
transaction's markers through the broker's ``MarkerWriter``; ``config`` holds the settings.
"""

from samsa.coordinator.transaction.config import TRANSACTION_STATE_TOPIC_NAME, TransactionConfig
from samsa.coordinator.transaction.coordinator import TransactionCoordinator
from samsa.coordinator.transaction.markers import MarkerWriter, TxnMarkerEntry
from samsa.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from samsa.coordinator.transaction.results import (
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
)
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
