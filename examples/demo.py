"""`make demo`: a real 3-broker cluster with ZooKeeper on this machine, used as a person would.

`samsa local up` starts ZooKeeper and three broker processes; a replicated topic is created,
records are produced and consumed with the CLI, one broker is stopped and the records are
still there, and a Spark pipeline (job (a), ad clicks per campaign window) runs on local Spark
against the cluster.  `samsa local down` stops everything; the data stays in ./.samsa/demo.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DATA = Path(".samsa/demo")


def samsa(*args: str, stdin: str | None = None) -> str:
    cmd = [sys.executable, "-m", "samsa.cli", *args]
    print("$ samsa " + " ".join(args), flush=True)
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=180)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(out.returncode)
    return out.stdout


def main() -> None:
    local = ["--data-dir", str(DATA)]
    up = samsa(
        "local",
        "up",
        "--brokers",
        "3",
        *local,
        "--override",
        "group.initial.rebalance.delay.ms=0",
    )
    bootstrap = up.strip().splitlines()[-1]
    b = ["-b", bootstrap]
    try:
        samsa(
            "topics",
            "create",
            "demo-clicks",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
            "--if-not-exists",
            *b,
        )
        samsa("topics", "describe", "demo-clicks", *b)
        lines = "".join(f"user{i % 5}:click on ad {i}\n" for i in range(20))
        samsa(
            "produce",
            "demo-clicks",
            "--key-separator",
            ":",
            "--header",
            "source=demo",
            *b,
            stdin=lines,
        )
        print("# one broker stops (a controlled shutdown); the records are all still there")
        from samsa.local_cluster.cluster import LocalCluster

        cluster = LocalCluster(DATA)
        cluster.state = cluster.load_state()
        cluster.stop_broker(2)
        samsa(
            "consume",
            "demo-clicks",
            "--from-beginning",
            "--count",
            "20",
            "--format",
            "%p/%o  %k => %s\n",
            *b,
        )
        samsa("local", "up", "--brokers", "3", *local)
        samsa("local", "status", *local)
        # Last, Spark: job (a) on local Spark against the cluster.
        from samsa_spark.demo import run_ad_clicks

        run_ad_clicks(bootstrap)
    finally:
        samsa("local", "down", *local)
    print("done; the cluster stopped cleanly and its data is kept in", DATA)


if __name__ == "__main__":
    main()
