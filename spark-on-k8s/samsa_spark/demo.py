"""`make demo`'s Spark part: job (a) on local Spark against a running cluster.

    from samsa_spark.demo import run_ad_clicks
    run_ad_clicks("127.0.0.1:9092")

It recreates two topics (demo-ad-clicks, 6 partitions; demo-ad-click-counts), publishes
generated clicks, runs job (a) until it has processed them (availableNow), reads the result
back with the samsa source and prints it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from samsa_spark.client import IdempotenceUnsupportedError
from samsa_spark.generator import generate, publish
from samsa_spark.spark_session import local_spark

INPUT, OUTPUT = "demo-ad-clicks", "demo-ad-click-counts"


def _recreate(bootstrap: str, topics: Mapping[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=30).topics)
    gone = [t for t in topics if t in existing]
    if gone:
        for f in admin.delete_topics(gone, operation_timeout=30).values():
            f.result(30)
        deadline = time.monotonic() + 30
        while set(gone) & set(admin.list_topics(timeout=30).topics):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topics {gone} were not deleted")
            time.sleep(0.1)
    new = [NewTopic(t, n, -1) for t, n in topics.items()]
    for f in admin.create_topics(new, operation_timeout=30).values():
        f.result(30)


def prepare_ad_clicks(
    bootstrap: str, impressions: int = 5000, seed: int = 7, source: str = INPUT, sink: str = OUTPUT
) -> dict[str, str]:
    """Recreate job (a)'s topics and publish generated clicks, with an idempotent producer
    where the brokers have one. Returns the sink's kafka.* options to match."""
    _recreate(bootstrap, {source: 6, sink: 1})
    imps, clicks = generate(impressions, seed=seed)
    kafka: dict[str, str] = {}
    try:
        publish(bootstrap, source, clicks, {"enable.idempotence": True})
    except IdempotenceUnsupportedError:
        print("  (the brokers have no idempotent producers yet: using enable.idempotence=false)")
        _recreate(bootstrap, {source: 6})
        publish(bootstrap, source, clicks, {"enable.idempotence": False})
        kafka = {"kafka.enable.idempotence": "false"}
    print(f"  published {len(clicks)} clicks on {len(imps)} impressions to {source}")
    return kafka


def run_ad_clicks(
    bootstrap: str, impressions: int = 5000, seed: int = 7, spark: Any = None
) -> list[dict[str, Any]]:
    """Run job (a) on local Spark against `bootstrap`; print and return its windows."""
    import json

    from samsa_spark.jobs import ad_clicks

    print(f"Spark job (a), AdClickEvents, against {bootstrap}")
    kafka = prepare_ad_clicks(bootstrap, impressions, seed)
    own_session = spark is None
    spark = spark or local_spark("samsa-demo")
    try:
        with tempfile.TemporaryDirectory(prefix="samsa-demo-ckpt-") as ckpt:
            started = time.monotonic()
            q = ad_clicks.start(
                spark, bootstrap, INPUT, OUTPUT, ckpt, available_now=True, sink_options=kafka
            )
            q.awaitTermination()
            if q.exception() is not None:
                raise RuntimeError(f"job (a) failed: {q.exception()}")
            print(f"  job (a) done in {time.monotonic() - started:.1f}s; results in {OUTPUT}:")
        rows = [
            json.loads(r.value)
            for r in spark.read.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", OUTPUT)
            .load()
            .selectExpr("CAST(value AS STRING) AS value")
            .collect()
        ]
    finally:
        if own_session:
            spark.stop()
    rows.sort(key=lambda r: (r["window_start"], r["campaign_id"]))
    print(f"  {'window (UTC)':<23} {'campaign':<12} {'clicks':>6}")
    for r in rows:
        window = f"{r['window_start'][11:16]}-{r['window_end'][11:16]} {r['window_start'][:10]}"
        print(f"  {window:<23} {r['campaign_id']:<12} {r['clicks']:>6}")
    print(f"  {len(rows)} windows, {sum(r['clicks'] for r in rows)} clicks in closed windows")
    return rows


def main(argv: list[str] | None = None) -> None:
    """`python -m samsa_spark.demo [run|prepare] --bootstrap HOST:PORT`."""
    import argparse

    p = argparse.ArgumentParser(description="job (a) demo: prepare its input, or run it all")
    p.add_argument("command", choices=["run", "prepare"])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input", default=INPUT)
    p.add_argument("--output", default=OUTPUT)
    p.add_argument("--impressions", type=int, default=5000)
    args = p.parse_args(argv)
    if args.command == "prepare":
        prepare_ad_clicks(args.bootstrap, args.impressions, source=args.input, sink=args.output)
    else:
        run_ad_clicks(args.bootstrap, args.impressions)


if __name__ == "__main__":
    main()
