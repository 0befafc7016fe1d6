"""InitProducerId (22): producer ids and epochs for idempotent producers; no transactions.

A transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Produce and
FindCoordinator refuse it: every client treats that as fatal and says so, where a retriable
code would leave a transactional producer retrying until it times out.
"""

from __future__ import annotations

import logging
from typing import Any

from samsa.coordinator.producer_id_manager import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from samsa.handlers.authorization import allowed_on_any, cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata.producer_ids import CorruptProducerIdBlockError, ProducerIdsExhaustedError
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)

KEY = 22
# v3 (KIP-360) adds the producer's current id and epoch; v4 and v5 change only what a
# transactional producer may be told.
MIN_VERSION, MAX_VERSION = 0, 5


def _answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": error,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        if request.transactional_id == "":
            return _answer(ErrorCode.invalid_request)
        return _answer(ErrorCode.transactional_id_authorization_failed)
    # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    # (KIP-679), as in Kafka.
    if not cluster_allowed(services, ctx, AclOperation.IDEMPOTENT_WRITE) and not allowed_on_any(
        services, ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return _answer(ErrorCode.cluster_authorization_failed)
    manager = services.producer_id_manager
    if manager is None:
        return _answer(ErrorCode.coordinator_not_available)
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        # Kafka's rule: the current id and epoch come together or not at all.
        return _answer(ErrorCode.invalid_request)
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
