"""Failure detection faster than the ZooKeeper session: a killed broker is replaced as soon as
nothing listens on its port, and a broker that is only slow is not."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_support import (
    ClusterFactory,
    LoadProducer,
    check_exactly_once,
    consume_all,
    create_topic,
    isr,
    leader,
    wait_until,
)
from kazoo.client import KazooClient

from samsa.local_cluster.cluster import LocalCluster
from samsa.local_cluster.zookeeper import ZooKeeperServer

SESSION_MS = 9000


def _controller(zk: KazooClient) -> int:
    found = zk.exists("/controller") and zk.get("/controller")
    return int(json.loads(found[0])["brokerid"]) if found else -1


def _leaders(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, int]:
    return {p: leader(cluster, topic, p) for p in range(partitions)}


def test_a_killed_leader_and_a_killed_controller_are_replaced_before_their_sessions_expire(
    start_cluster: ClusterFactory,
) -> None:
    # Sessions far longer than the test: any failover seen here came from the probes.
    cluster = start_cluster(3, zookeeper_session_timeout_ms=120_000)
    create_topic(cluster, "alive", partitions=3, rf=3, **{"min.insync.replicas": "1"})
    zk = KazooClient(cluster.zookeeper_connect)
    zk.start(10)
    try:
        wait_until(lambda: len(set(_leaders(cluster, "alive", 3).values())) == 3, 60)
        controller = _controller(zk)
        leaders = _leaders(cluster, "alive", 3)
        # First a leader that is not the controller: the controller's probes find it gone.
        victim = next(b for b in leaders.values() if b != controller)
        led = next(p for p, b in leaders.items() if b == victim)
        cluster.kill_broker(victim)
        wait_until(lambda: leader(cluster, "alive", led) not in (-1, victim), 60)
        assert zk.exists(f"/brokers/ids/{victim}") is not None, "its session expired first"
        wait_until(lambda: victim not in isr(cluster, "alive", led), 30, what="ISR without it")
        # Then the controller, which leads a partition: the others' probes find it gone, a new
        # controller is elected, and its probes find the old one gone.
        led = next(p for p, b in leaders.items() if b == controller)
        cluster.kill_broker(controller)
        wait_until(lambda: _controller(zk) not in (-1, controller), 60, what="a new controller")
        wait_until(lambda: leader(cluster, "alive", led) not in (-1, controller, victim), 60)
        assert zk.exists(f"/brokers/ids/{controller}") is not None, "its session expired first"
    finally:
        zk.stop()
        zk.close()


@pytest.mark.slow
def test_a_leader_paused_shorter_than_the_session_costs_no_acknowledged_record(
    start_cluster: ClusterFactory, record_property: object
) -> None:
    # Slowness is left to the ZooKeeper session: a 2.5 s pause is not a death. The server
    # must hear the broker within the session, and the broker pings only a third of a
    # session after its last request, so a pause eats into what is left after that ping
    # interval: with 6 s, 2 s + 2.5 s left 1.5 s, which a loaded machine's ZooKeeper ate once
    # in a full make test (test_a_pause_and_a_ping_interval_must_leave_zookeeper_room). With
    # 9 s, 3 s + 2.5 s leaves 3.5 s.
    cluster = start_cluster(3, zookeeper_session_timeout_ms=SESSION_MS)
    create_topic(cluster, "slow", partitions=2, rf=3, **{"min.insync.replicas": "2"})
    load = LoadProducer(cluster, "slow", idempotent=True).start()
    zk = KazooClient(cluster.zookeeper_connect)
    zk.start(10)
    try:
        wait_until(lambda: load.oracle.count() > 1000, 60, what="load")
        paused = leader(cluster, "slow", 0)
        was_controller = _controller(zk) == paused
        registered = zk.exists(f"/brokers/ids/{paused}")
        assert registered is not None
        cluster.signal_broker(paused, signal.SIGSTOP)
        try:
            time.sleep(2.5)  # the fault itself: a pause of a set length
        finally:
            cluster.signal_broker(paused, signal.SIGCONT)
        before = load.oracle.count()
        wait_until(lambda: load.oracle.count() > before + 1000, 60, what="writes after")
        now = leader(cluster, "slow", 0)
        still = zk.exists(f"/brokers/ids/{paused}")
        same_session = still is not None and still.czxid == registered.czxid
    finally:
        zk.stop()
        zk.close()
        oracle = load.stop()
    lost = now != paused
    report = (
        f"broker {paused} (controller: {was_controller}) paused 2.5 s under acks=all load: "
        f"{'lost' if lost else 'kept'} leadership of slow-0 (leader now {now}); "
        f"same ZooKeeper session: {same_session}; {oracle.count()} records acknowledged"
    )
    print(report)
    record_property("slow_broker", report)  # type: ignore[operator]
    assert same_session, "a pause shorter than the session cost the broker its registration"
    check_exactly_once(oracle, consume_all(cluster, "slow", 2))


# A kazoo client (the broker's ZooKeeper client) that holds an ephemeral node and says when it
# pings, in a process of its own so that it can be paused as a broker is.
_PINGING_CLIENT = """
import sys, time
from kazoo.client import KazooClient
from kazoo.protocol import connection
send_ping = connection.ConnectionHandler._send_ping
def ping(self, timeout):
    print("ping", flush=True)
    return send_ping(self, timeout)
connection.ConnectionHandler._send_ping = ping
zk = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[2]), command_retry=None)
zk.start(30)
zk.create("/held", b"", ephemeral=True)
print("held", flush=True)
time.sleep(120)
"""


def _session_after_pause_and_stall(
    server: ZooKeeperServer, session_s: float, stall_s: float
) -> bool:
    """Pause a client for 2.5 s just before its next ping is due, and stall the ZooKeeper
    server (SIGSTOP) for ``stall_s`` as the client resumes, as a loaded machine may: whether
    the client's session, and so its ephemeral node, outlives it."""
    assert server.process is not None
    client = subprocess.Popen(
        [sys.executable, "-c", _PINGING_CLIENT, server.connect_string, str(session_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    watcher = KazooClient(server.connect_string)
    watcher.start(30)
    try:
        assert client.stdout is not None
        lines = (line.strip() for line in iter(client.stdout.readline, ""))
        assert "held" in lines, "the client did not take its node"
        assert "ping" in lines, "the client never pinged"
        # kazoo pings a third of a session after its last request, less up to 0.4 s of
        # jitter (1.6 s at the soonest here): paused 1.1 s after a ping, before the next one,
        # the server last heard of it 1.1 s before the pause.
        time.sleep(1.1)  # the fault itself: its placement
        client.send_signal(signal.SIGSTOP)
        last_heard = time.monotonic()
        time.sleep(2.5)  # the fault itself: the pause
        server.process.send_signal(signal.SIGSTOP)
        client.send_signal(signal.SIGCONT)
        time.sleep(stall_s)  # the fault itself: the server's stall
        server.process.send_signal(signal.SIGCONT)
        # Unheard of since the pause, the session would be gone a session later (the server
        # expires by ticks of 0.5 s): by then it either was renewed or expired.
        deadline = last_heard + session_s + 1.5
        while time.monotonic() < deadline:
            if watcher.exists("/held") is None:
                return False
            time.sleep(0.2)
        return True
    finally:
        watcher.stop()
        watcher.close()
        client.kill()
        client.wait(10)


def test_a_pause_and_a_ping_interval_must_leave_zookeeper_room(tmp_path: Path) -> None:
    """Why the pause test above runs with a 9 s session, not 6 s: the server must hear a
    client within the session, counted from the client's last ping, not from its pause. A
    2.5 s pause 1.1 s after a ping, with ZooKeeper slow for 4 s to hear the resumed client
    (each shorter than either session), leaves it unheard for 7.6 s, which a 9 s session
    outlives.

    A 6 s session is past its deadline by then, and was lost in the runs on a quiet machine,
    but kept once in a loaded make test: as ZooKeeper resumes, its session expirer and the
    resumed client's ping, already in the socket, race. So only the session with room is
    asserted; with the 6 s this test fails in most runs."""
    with ZooKeeperServer(tmp_path / "zk") as server:
        assert _session_after_pause_and_stall(server, SESSION_MS / 1000, 4.0)
