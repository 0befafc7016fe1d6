"""What the consumer-group handlers share: the coordinator, the client's host, error wording."""

from __future__ import annotations

from samsa.coordinator import GroupCoordinator
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode


def coordinator(services: BrokerServices) -> GroupCoordinator | None:
    """The group coordinator, or None while the broker is still starting it."""
    return services.group_coordinator


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it in DescribeGroups: "/" and the IP."""
    peer = ctx.conn.peer
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host


def client_id(ctx: RequestContext) -> str:
    return ctx.header.client_id or ""


NOT_AVAILABLE = ErrorCode.coordinator_not_available
