"""The transaction coordinator's settings (Kafka's TransactionConfig), by Kafka name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"


@dataclass(frozen=True)
class TransactionConfig:
    """Defaults are Kafka 3.x's."""

    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    remove_expired_transactional_ids_cleanup_interval_ms: int = 3_600_000
    # How long a WriteTxnMarkers round may take before it is sent again.
    request_timeout_ms: int = 30_000
    # Between rounds of WriteTxnMarkers that left partitions without their marker.
    marker_retry_backoff_ms: int = 100

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> TransactionConfig:
        d = cls()

        def get(name: str, default: int) -> int:
            value = props.get(name)
            return default if value is None else int(value)

        return cls(
            transaction_state_log_num_partitions=get(
                "transaction.state.log.num.partitions", d.transaction_state_log_num_partitions
            ),
            transaction_max_timeout_ms=get(
                "transaction.max.timeout.ms", d.transaction_max_timeout_ms
            ),
            transactional_id_expiration_ms=get(
                "transactional.id.expiration.ms", d.transactional_id_expiration_ms
            ),
            abort_timed_out_transaction_cleanup_interval_ms=get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                d.abort_timed_out_transaction_cleanup_interval_ms,
            ),
            remove_expired_transactional_ids_cleanup_interval_ms=get(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                d.remove_expired_transactional_ids_cleanup_interval_ms,
            ),
            request_timeout_ms=get("request.timeout.ms", d.request_timeout_ms),
        )
