"""Deferred: a response that waits without holding its connection.

A request whose answer only waits on other brokers (acks=all waiting for the ISR) has done its
work on this broker by the time its handler returns, so the requests behind it need not wait
for it to be *answered*: the connection goes on handling them, and the answers still leave in
request order. Without this a client pipelining small acks=all requests (librdkafka with a
short linger) gets one replication round trip per request, and its queue grows without bound
once it asks for more than that.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any


class Deferred:
    """Wraps the awaitable that produces a response whose request's side effects are done."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable
