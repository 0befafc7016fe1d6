"""free_port: ports for the servers tests start, out of the way of clients' source ports."""

from __future__ import annotations

import socket

import pytest

from samsa.local_cluster.ports import _ephemeral_start, free_port


def test_free_ports_are_bindable_and_below_the_ephemeral_range() -> None:
    top = _ephemeral_start()
    ports = {free_port() for _ in range(50)}
    assert all(10_000 <= p < top for p in ports), sorted(ports)
    assert len(ports) > 40, "picked at random, not the same few"
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))


def test_a_process_is_never_given_the_same_port_twice() -> None:
    # 2,000 random picks from about 22,000 ports would repeat some (the birthday bound): a
    # cluster picks its ports before its brokers bind any, so a repeat is two brokers on one.
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)


def test_xdist_workers_take_disjoint_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    for index in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        assert {free_port() % 3 for _ in range(30)} == {index}
