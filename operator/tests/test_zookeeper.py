"""Asking a real ZooKeeper server its role (the day-2 roll restarts the leader last)."""

from __future__ import annotations

from pathlib import Path

from samsa.local_cluster import ZooKeeperServer
from samsa.local_cluster.zookeeper import free_port
from samsa_dev.kube.harness import eventually
from samsa_operator import zookeeper


async def test_a_server_says_its_mode_and_a_missing_one_nothing(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as zk:
        # A server answers "not currently serving requests" for a moment after it starts.
        mode = await eventually(lambda: zookeeper.server_mode("127.0.0.1", zk.port), 30, "srvr")
        assert mode == "standalone"
    assert await zookeeper.server_mode("127.0.0.1", free_port()) is None


def test_addresses_parse() -> None:
    assert zookeeper.parse_address("zk-0.zk:2181", 1) == ("zk-0.zk", 2181)
    assert zookeeper.parse_address(" 10.0.0.1 ", 2181) == ("10.0.0.1", 2181)
