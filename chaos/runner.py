"""The campaign: a cluster under load, a seeded nemesis injecting one fault at a time (any
applicable kind found in chaos.faults), each held, healed and recovered from, then a final heal,
a full read, the checker's verdict and the report."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import pkgutil
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

import chaos.faults
from chaos import load
from chaos.checker import Verdict, check, read_logs
from chaos.cluster import ChaosCluster
from chaos.faults.base import Fault, FaultKind
from chaos.netns import ZOOKEEPER_NODE, Netns, broker_node, unavailable_reason
from chaos.report import render

# For kinds that do not say how long to hold them (``hold_s``): either side of the ISR's
# failure detection.
DEFAULT_HOLD_S = (1.0, 8.0)
RECOVERY_TIMEOUT_S = 120.0


def discover() -> list[FaultKind]:
    """Every kind of every module of chaos.faults, in a stable order (the seed depends on it)."""
    kinds: list[FaultKind] = []
    for info in sorted(pkgutil.iter_modules(chaos.faults.__path__), key=lambda i: i.name):
        if info.name == "base":
            continue
        module = importlib.import_module(f"chaos.faults.{info.name}")
        kinds.extend(getattr(module, "KINDS", []))
    return sorted(kinds, key=lambda k: k.name)


@dataclass
class Campaign:
    faults: int | None = None
    duration: float | None = None
    seed: int = 0
    brokers: int = 3
    workdir: Path | None = None
    keep: bool = False
    rate: float = 40.0
    # Brokers and ZooKeeper each in a network namespace, so that the network kinds apply;
    # where namespaces cannot be made (no root), the campaign runs on 127.0.0.1 without them.
    network: bool = True


@dataclass
class Outcome:
    verdict: Verdict
    campaign: Campaign
    elapsed_s: float
    unrecovered: int
    load_failures: list[str]
    skipped_kinds: list[str]
    # What the brokers logged at ERROR or worse, by message (counted, not judged).
    broker_errors: dict[str, int]
    # Judged again from kept logs (``--check``), not as the campaign ended.
    rejudged: bool = False

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.load_failures


def recovered(env: ChaosCluster, admin: AdminClient) -> bool:
    """Every broker up and caught up, and every partition of the load's topics led with its
    full ISR."""
    if not env.zookeeper_pid or not all(env.ready(b) for b in env.brokers):
        return False
    try:
        md = admin.list_topics(timeout=5)
    except Exception:
        return False
    for topic in load.topics():
        t = md.topics.get(topic)
        if t is None or t.error is not None or len(t.partitions) < load.PARTITIONS:
            return False
        for p in t.partitions.values():
            if p.leader < 0 or len(p.isrs) < min(3, len(env.brokers)):
                return False
    return True


def wait_recovered(env: ChaosCluster, admin: AdminClient, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if recovered(env, admin):
            return True
        time.sleep(0.25)
    return False


def heal_everything(env: ChaosCluster, faults: list[Fault]) -> None:
    for fault in faults:
        fault.heal()
    if env.network is not None:
        env.network.heal()
    if not env.zookeeper_pid:
        env.restart_zookeeper()
    for b in env.brokers:
        if env.broker_pid(b) is None:
            env.start_broker(b)


def run(campaign: Campaign) -> Outcome:
    if campaign.faults is None and campaign.duration is None:
        raise ValueError("a campaign needs a number of faults or a duration")
    rng = random.Random(campaign.seed)
    workdir = Path(campaign.workdir or tempfile.mkdtemp(prefix="chaos-"))
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    client_log = logging.FileHandler(workdir / "clients.log")
    load.CLIENT_LOG.addHandler(client_log)
    load.CLIENT_LOG.propagate = False
    started = time.monotonic()
    namespaces = contextlib.ExitStack()
    network: Netns | None = None
    if campaign.network and unavailable_reason() is None:
        nodes = [ZOOKEEPER_NODE] + [broker_node(b) for b in range(campaign.brokers)]
        network = namespaces.enter_context(Netns(nodes))
    env = ChaosCluster(workdir / "cluster", campaign.brokers, network=network)
    nemesis = load.OpLog(logs / "nemesis.jsonl")
    injected: list[Fault] = []
    unrecovered = 0
    workers: list[load.Worker] = []
    all_kinds = discover()
    skipped: list[str] = []
    try:
        env.up()
        # Asked of the running cluster: a disk fault needs the data directories mounted.
        kinds = [k for k in all_kinds if k.applicable(env)]
        skipped = [k.name for k in all_kinds if k not in kinds]
        bootstrap = env.bootstrap_servers
        load.create_topics(bootstrap)
        admin = AdminClient(load.admin_config(bootstrap))
        if not wait_recovered(env, admin, RECOVERY_TIMEOUT_S):
            raise TimeoutError("the load's topics never had a leader and a full ISR")
        nemesis.write(op="compacted", topic=load.COMPACTED)
        nemesis.write(op="campaign", seed=campaign.seed, brokers=campaign.brokers, t=time.time())
        workers = [
            load.ProducerWorker(
                "idem-a", bootstrap, logs, load.ACKS_ALL, "all", True, 0, campaign.rate
            ),
            load.ProducerWorker(
                "idem-b", bootstrap, logs, load.ACKS_ALL, "all", True, 0, campaign.rate
            ),
            load.ProducerWorker(
                "acks1", bootstrap, logs, load.ACKS_ONE, "1", False, 0, campaign.rate
            ),
            load.ProducerWorker(
                "compact", bootstrap, logs, load.COMPACTED, "all", True, 50, campaign.rate / 2
            ),
            load.ConsumerWorker("member-a", bootstrap, logs),
            load.ConsumerWorker("member-b", bootstrap, logs),
        ]
        for w in workers:
            w.start()
        count = 0
        deck: list[FaultKind] = []
        while True:
            if campaign.faults is not None and count >= campaign.faults:
                break
            if campaign.duration is not None and time.monotonic() - started > campaign.duration:
                break
            if not deck:
                # Every kind once per round, in a seeded order: a short campaign still meets
                # every kind, and a long one meets them evenly.
                deck = list(kinds)
                rng.shuffle(deck)
            kind = deck.pop()
            t_inject = time.time()
            fault = kind.inject(env, rng)
            injected.append(fault)
            low, high = DEFAULT_HOLD_S
            hold = float(getattr(fault, "hold_s", None) or rng.uniform(low, high))
            time.sleep(hold)  # the fault's length is the fault, not a wait for something
            fault.heal()
            t_heal = time.time()
            ok = wait_recovered(env, admin, RECOVERY_TIMEOUT_S)
            if not ok:
                unrecovered += 1
                heal_everything(env, injected)
            count += 1
            record: dict[str, Any] = {
                "op": "fault",
                "n": count,
                "kind": fault.kind,
                "t_inject": t_inject,
                "t_heal": t_heal,
                "t_recovered": time.time(),
                "recovered": ok,
                **fault.describe(),
            }
            nemesis.write(**record)
            print(json.dumps(record), flush=True)
        for w in workers:
            w.stop()
        for w in workers:
            w.join(120)
        heal_everything(env, injected)
        if not wait_recovered(env, admin, RECOVERY_TIMEOUT_S):
            unrecovered += 1
        load.final_read(bootstrap, logs)
    finally:
        for w in workers:
            w.stop()
        nemesis.close()
        env.close()
        namespaces.close()
        load.CLIENT_LOG.removeHandler(client_log)
        client_log.close()
    failures = [f"{w.name}: {w.failure!r}" for w in workers if w.failure is not None]
    failures += [f"{w.name}: still running" for w in workers if w.is_alive()]
    verdict = check(read_logs(logs))
    outcome = Outcome(
        verdict,
        campaign,
        time.monotonic() - started,
        unrecovered,
        failures,
        skipped,
        broker_errors(workdir / "cluster"),
    )
    (workdir / "verdict.json").write_text(json.dumps(verdict.to_json(), indent=1))
    if outcome.ok and not campaign.keep and campaign.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs kept in {workdir}", flush=True)
    return outcome


_LOG_LINE = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) (\S+) (.*)$")


def broker_errors(cluster_dir: Path) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for path in sorted(cluster_dir.glob("broker-*/broker.log")):
        with path.open(errors="replace") as f:
            for line in f:
                match = _LOG_LINE.match(line)
                if match:
                    # Numbers (ports, offsets, pids) apart, the same message is the same error.
                    counts[re.sub(r"\d+", "N", f"{match[2]} {match[3]}")[:160]] += 1
    return dict(counts.most_common())


def rejudge(workdir: Path) -> Outcome:
    """The checker again over a kept campaign's logs (``python -m chaos --check WORKDIR``): the
    verdict of a run whose checker has since changed, without running the faults again."""
    logs = workdir / "logs"
    ops = read_logs(logs)
    start = next(o for o in ops if o.get("op") == "campaign")
    faults = [o for o in ops if o.get("op") == "fault"]
    end = max((f["t_recovered"] for f in faults), default=start["t"])
    campaign = Campaign(faults=len(faults), seed=start["seed"], brokers=start["brokers"])
    return Outcome(
        check(ops),
        campaign,
        end - start["t"],
        sum(1 for f in faults if not f.get("recovered", True)),
        [],
        [],
        broker_errors(workdir / "cluster"),
        rejudged=True,
    )


def write_report(outcome: Outcome, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(outcome))
