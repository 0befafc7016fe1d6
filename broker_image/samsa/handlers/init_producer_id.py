"""InitProducerId (22): producer ids and epochs; a transactional id's fence its older producer.

Idempotent producers get theirs from the producer id manager; transactional ones from the
transaction coordinator, which bumps the id's epoch (aborting its open transaction first).
"""

from __future__ import annotations

import logging
from typing import Any

from samsa.coordinator.producer_id_manager import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from samsa.handlers.authorization import (
    allowed_on_any,
    cluster_allowed,
    transactional_id_allowed,
)
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.handlers.transactions import fenced_for, transaction_coordinator
from samsa.metadata.producer_ids import CorruptProducerIdBlockError, ProducerIdsExhaustedError
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ms
from samsa.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)

KEY = 22
# v3 (KIP-360) adds the producer's current id and epoch; v4 and v5 change only what a
# transactional producer may be told.
MIN_VERSION, MAX_VERSION = 0, 5
# v4 is the first to be told PRODUCER_FENCED (KIP-588).
FIRST_PRODUCER_FENCED = 4


def _answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": error,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        # Kafka's rule: the current id and epoch come together or not at all.
        return _answer(ErrorCode.invalid_request)
    txn_id = request.transactional_id
    if txn_id is not None:
        if txn_id == "":
            return _answer(ErrorCode.invalid_request)
        if not transactional_id_allowed(services, ctx, AclOperation.WRITE, txn_id):
            return _answer(ErrorCode.transactional_id_authorization_failed)
        tc = transaction_coordinator(services)
        if tc is None:
            return _answer(ErrorCode.coordinator_not_available)
        result = await tc.init_producer_id(
            txn_id, ms(request.transaction_timeout), producer_id, epoch
        )
        error = fenced_for(ctx.version, FIRST_PRODUCER_FENCED, result.error)
        return _answer(error, result.producer_id, result.producer_epoch)
    # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    # (KIP-679), as in Kafka.
    if not cluster_allowed(services, ctx, AclOperation.IDEMPOTENT_WRITE) and not allowed_on_any(
        services, ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return _answer(ErrorCode.cluster_authorization_failed)
    manager = services.producer_id_manager
    if manager is None:
        return _answer(ErrorCode.coordinator_not_available)
    try:
        producer_id, epoch = await manager.init_producer_id(producer_id, epoch)
    except ProducerIdsExhaustedError as exc:
        log.error("InitProducerId from %s: %s", ctx.conn.peer, exc)
        return _answer(ErrorCode.unknown_server_error)
    except (OSError, CorruptProducerIdBlockError) as exc:
        # Retriable for the client: it asks again, and may find the disk back.
        log.error("cannot claim a block of producer ids: %s", exc)
        return _answer(ErrorCode.coordinator_not_available)
    return _answer(ErrorCode.none, producer_id, epoch)
