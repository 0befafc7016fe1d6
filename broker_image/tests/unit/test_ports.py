"""free_port: ports for the servers tests start, out of the way of clients' source ports."""

from __future__ import annotations

import socket

from samsa.local.ports import _ephemeral_start, free_port


def test_free_ports_are_bindable_and_below_the_ephemeral_range() -> None:
    top = _ephemeral_start()
    ports = {free_port() for _ in range(50)}
    assert all(10_000 <= p < top for p in ports), sorted(ports)
    assert len(ports) > 40, "picked at random, not the same few"
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))
