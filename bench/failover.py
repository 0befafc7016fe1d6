"""Failover, repeated: the leader of a stream's first partition stopped, time until an
acks=all write issued after it is acknowledged; the median of several stops, and the slowest.

Each stop gets a freshly started system (the peers' harness: `samsa local up`, three
nats-server processes), so every one starts from a full cluster.  A producer writing
as fast as it can to another stream keeps the servers and the machine busy meanwhile, so
that a failure detector that mistakes load for death would show it.  Rows:
  - Samsa, kill -9: the controller's probes (and the brokers' probes of the controller) find
    the dead broker before its ZooKeeper session (6 s, as in the peers' run) expires;
  - Samsa, kill -9, probes off (broker.liveness.probe.interval.ms=0): the old path, where the
    session expiry alone tells, measured in the same run as the baseline;
  - Samsa, SIGTERM: controlled shutdown hands the leaderships over before the broker goes;
  - Apache Kafka (3 KRaft nodes, broker.session.timeout.ms 6 s), kill -9, where its jars are
    cached (`samsa-dev jars`), the reference;
  - NATS JetStream R3, kill -9, where nats-server is installed.
"""

from __future__ import annotations

import contextlib
import re
import signal
import statistics
import threading
import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient

from bench.procs import require_binary
from bench.samsa_system import SamsaCluster
from bench.system import System
from bench.table import Row
from bench.workloads import STREAM, ClientProc, _args, measure_failover

LOAD_STREAM = "bench-failover-load"
_FENCED = re.compile(r"broker (\d+) is fenced")
SIZE = 100
Stopper = Callable[[System], None]


class SamsaClusterSessionOnly(SamsaCluster):
    """The cluster with probing off: a killed broker is noticed when its session expires."""

    overrides = {"broker.liveness.probe.interval.ms": "0"}
    topology = "3 brokers, RF=3, min.insync.replicas=2, ZooKeeper session timeout 6 s, no probes"


def _one(
    make: Callable[[], System], stop: Callable[[System], None], load: bool
) -> dict[str, float | None]:
    with make() as system:
        system.create_stream(STREAM, 6)
        background = None
        if load:
            system.create_stream(LOAD_STREAM, 6)
            background = ClientProc(
                system.key,
                "produce",
                *_args(system, {"stream": LOAD_STREAM, "count": 10**9, "size": SIZE}),
            )
        try:
            if background is not None:
                _wait_written(system, LOAD_STREAM)
            values = measure_failover(system, stop)
        finally:
            if background is not None:
                background.proc.kill()
                background.proc.wait(30)
        handover = getattr(system, "handover", None)
        if handover is not None:
            handover.join(60)
            values["handover_s"] = getattr(system, "handover_s", None)
        values["controller"] = float(getattr(system, "stopped_controller", False))
        values["false_fences"] = float(len(_false_fences(system)))
        return values


def _wait_written(system: System, stream: str, timeout: float = 60.0) -> None:
    """Until the load generator's records are stored: it is connected and producing."""
    deadline = time.monotonic() + timeout
    while system.stored(stream) == 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing written to {stream} after {timeout:.0f} s")
        time.sleep(0.1)


def _false_fences(system: System) -> set[int]:
    """Brokers the controllers fenced, other than the one stopped: false failovers."""
    stopped = getattr(system, "stopped_broker", None)
    fenced = set()
    for path in (system.workdir / "data").glob("broker-*.log"):
        fenced |= {int(m) for m in _FENCED.findall(path.read_text(errors="replace"))}
    return fenced - {stopped}


def _row(
    label: str,
    system: str,
    make: Callable[[], System],
    stop: Callable[[System], None],
    runs: int,
    load: bool,
    log: Callable[[str], None],
    metric: str = "recovery_s",
) -> Row:
    """``metric``: recovery_s (the probe's first write after the stop, acknowledged) or
    handover_s (the metadata names another leader)."""
    times: list[float] = []
    failed = 0
    controllers = 0
    false_fences = 0
    for i in range(runs):
        values = _one(make, stop, load)
        seconds = values.get(metric)
        log(
            f"  {label} run {i + 1}: {seconds} s (first write after it: {values.get('recovery_s')}"
            f" s; controller: {bool(values['controller'])}, "
            f"other brokers fenced: {int(values['false_fences'] or 0)})"
        )
        controllers += int(values["controller"] or 0)
        false_fences += int(values["false_fences"] or 0)
        if seconds is None:
            failed += 1
        else:
            times.append(seconds)
    times.sort()
    note = f"median and slowest of {runs}"
    if controllers:
        note += f"; {controllers} of them the controller too"
    if failed:
        note += f"; {failed} never recovered"
    if system == "samsa":
        note += f"; live brokers fenced (false failovers): {false_fences}"
    if load:
        note += f"; {SIZE} B acks=all producer at full speed meanwhile"
    return Row(
        label,
        system,
        p50_ms=statistics.median(times) * 1000 if times else None,
        p99_ms=times[-1] * 1000 if times else None,
        note=note,
        extra={"runs": float(runs)},
    )


def _kill(system: System) -> None:
    system.kill_leader(STREAM)


def _terminate(system: System) -> None:
    """SIGTERM, and (on the side) the time until the metadata names another leader: the
    handover itself, whereas the probe's first write may still be taken by the old leader."""
    assert isinstance(system, SamsaCluster)
    admin = AdminClient({"bootstrap.servers": system.endpoint})
    old = admin.list_topics(STREAM, timeout=10).topics[STREAM].partitions[0].leader
    started = time.monotonic()
    system.kill_leader(STREAM, signal.SIGTERM)

    def watch() -> None:
        while time.monotonic() - started < 30:
            with contextlib.suppress(Exception):
                meta = admin.list_topics(STREAM, timeout=2).topics[STREAM]
                if meta.partitions[0].leader not in (-1, old):
                    system.handover_s = time.monotonic() - started  # type: ignore[attr-defined]
                    return
            time.sleep(0.01)

    system.handover = threading.Thread(target=watch, daemon=True)  # type: ignore[attr-defined]
    system.handover.start()  # type: ignore[attr-defined]


def run(quick: bool = False, log: Callable[[str], None] = print) -> list[Row]:
    runs = 1 if quick else 5
    load = not quick
    kill = "kill -9 of the leader -> first acks=all write"
    plan: list[tuple[str, str, Callable[[], object], Callable[[], type[System]], Stopper]] = [
        (kill, "samsa", lambda: None, lambda: SamsaCluster, _kill),
        (kill, "kafka", _kafka_available, _kafka, _kill),
        (
            "kill -9 of the leader, probes off (the session alone)",
            "samsa",
            lambda: None,
            lambda: SamsaClusterSessionOnly,
            _kill,
        ),
        (
            "SIGTERM of the leader (controlled shutdown) -> metadata names the new leader",
            "samsa",
            lambda: None,
            lambda: SamsaCluster,
            _terminate,
        ),
        (kill, "nats", lambda: require_binary("nats-server"), _nats, _kill),
    ]
    rows = []
    for label, system, available, make, stop in plan:
        try:
            available()
        except Exception as exc:
            log(f"  {system} skipped: {exc}")
            continue
        metric = "handover_s" if stop is _terminate else "recovery_s"
        rows.append(_row(label, system, make(), stop, runs, load, log, metric))
    return rows


def _kafka_available() -> None:
    from samsa_dev import jars, kafka

    if not jars.is_fetched(kafka.JAR_SET):
        raise RuntimeError("Kafka's jars are not cached (make setup)")


def _kafka() -> type[System]:
    from bench.kafka_system import ApacheKafkaCluster

    return ApacheKafkaCluster


def _nats() -> type[System]:
    from bench.nats_system import NatsJetStream

    return NatsJetStream
