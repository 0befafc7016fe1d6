"""The broker's side of transaction partition verification: ask a transactional id's
coordinator whether partitions are in its ongoing transaction.

The coordinator is the leader of the id's ``__transaction_state`` partition: in-process when
that is this broker (always, standalone), else AddPartitionsToTxn v4 with ``verify_only`` over
the inter-broker connections, as Kafka's AddPartitionsToTxnManager sends it.
"""

from __future__ import annotations

from collections.abc import Callable

from samsa.client import ConnectionPool
from samsa.coordinator.transaction import TRANSACTION_STATE_TOPIC_NAME, TransactionCoordinator
from samsa.metadata import MetadataCache, TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type

ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4


class BrokerTransactionVerifier:
    def __init__(
        self,
        broker_id: int,
        cache: MetadataCache,
        coordinator: Callable[[], TransactionCoordinator | None],
        pool: Callable[[], ConnectionPool | None],
        timeout_s: Callable[[], float],
    ) -> None:
        self.broker_id = broker_id
        self.cache = cache
        self._coordinator = coordinator
        self._pool = pool
        self._timeout_s = timeout_s

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        tc = self._coordinator()
        if tc is None:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        pool = self._pool()
        leader = self.broker_id
        if pool is not None:
            state = self.cache.partition_state(
                TRANSACTION_STATE_TOPIC_NAME, tc.partition_for(transactional_id)
            )
            if state is None or state.leader < 0:
                # No __transaction_state yet: no transaction has begun anywhere.
                return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
            leader = state.leader
        if leader == self.broker_id:
            return tc.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        assert pool is not None
        return await self._remote(
            pool, leader, transactional_id, producer_id, producer_epoch, partitions
        )

    async def _remote(
        self,
        pool: ConnectionPool,
        leader: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = build(
            request_type(ADD_PARTITIONS_TO_TXN, VERIFY_VERSION),
            {
                "transactions": [
                    {
                        "transactional_id": transactional_id,
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "verify_only": True,
                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                    }
                ]
            },
        )
        try:
            response = await pool.request(
                leader, ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request, self._timeout_s()
            )
        except (OSError, TimeoutError):
            pool.drop(leader)
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        if response.error_code != ErrorCode.none:
            error = ErrorCode(response.error_code)
            if error is ErrorCode.cluster_authorization_failed:
                # The producer is not told of an authorization between brokers.
                error = ErrorCode.invalid_txn_state
            return dict.fromkeys(partitions, error)
        answers: dict[TopicPartition, ErrorCode] = {}
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    answers[TopicPartition(topic.name, p.partition_index)] = ErrorCode(
                        p.partition_error_code
                    )
        # A partition the answer left out was not verified.
        return {tp: answers.get(tp, ErrorCode.invalid_txn_state) for tp in partitions}
