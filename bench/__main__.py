"""`python -m bench [components|peers] ...`: every benchmark, or one family of them.

- ``components [--quick] [--only NAME]``: each part of Samsa on its own (broker core, consumer
  groups, the log cleaner, recompression, Spark reads), each beside its baseline from the same
  run;
- ``peers [...]``: Samsa (3 brokers, RF=3, acks=all and acks=1) beside Apache Kafka, NATS
  JetStream and Redis Streams: throughput, end-to-end latency and failover (see ``bench.peers``).

With no family, both run: the components first, then the peers with their defaults
(``--docs DIR``, as ``make bench`` gives it, goes to the peers).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bench import (
    broker_core,
    cleaner,
    cold_start,
    compression,
    failover,
    groups,
    operations,
    peers,
    replication,
    request_cpu,
    security,
    spark_read,
    spark_write,
    transactions,
)
from bench.table import Row, print_table

COMPONENTS: dict[str, tuple[str, Callable[[bool], list[Row]]]] = {
    "broker_core": ("Broker core: one broker, librdkafka, acks=1", broker_core.run),
    "replication": (
        "Replication: 3 brokers, librdkafka, 100 B records, 6 partitions; e2e latency, RF=1 "
        "beside RF=3, and the brokers' stage timings (histogram percentiles)",
        replication.run,
    ),
    "request_cpu": (
        "Replicated path CPU: 3 brokers, librdkafka, 100 B records, 6 partitions, linger.ms=1; "
        "the brokers' cores and CPU per request at 200, 1,000 and 10,000 msg/s, RF=3 acks=all "
        "beside RF=1 acks=1, medians of 3 runs",
        request_cpu.run,
    ),
    "groups": ("Consumer groups: 3 librdkafka members, 6 partitions, 100 B records", groups.run),
    "cleaner": (
        "Log cleaner: one log, cleaned in the cleaner's thread and on the event loop; "
        "p50-p99.9 = loop lag meanwhile",
        cleaner.run,
    ),
    "failover": (
        "Failover: 3 brokers, RF=3, min.insync.replicas=2, ZooKeeper session 6 s; "
        "p50 = median of the stops, p99 column = the slowest",
        failover.run,
    ),
    "operations": (
        "Day-2 operations by the operator: 3-broker roll and 3-to-5 rebalance, "
        "idempotent acks=all producer at 1 MB/s meanwhile",
        operations.run,
    ),
    "cold_start": (
        "Cold start: a standalone broker from `samsa broker` until it serves, and its imports",
        cold_start.run,
    ),
    "security": (
        "Security: one broker, librdkafka, 1 KB records, 6 partitions; PLAINTEXT beside "
        "SASL_SSL with SCRAM-SHA-512",
        security.run,
    ),
    "compression": (
        "Compression: one broker, librdkafka, 1 KB log-like records sent uncompressed, "
        "6 partitions, acks=1; stored as sent beside the broker recompressing with each "
        "topic compression.type",
        compression.run,
    ),
    "transactions": (
        "Transactions: one broker, librdkafka, 1 KB records, 6 partitions, acks=all; "
        "idempotent beside transactional with a commit every 100 ms",
        transactions.run,
    ),
    "spark": (
        "Spark: rows read into local[2] Spark from a 6-partition topic, beside Parquet",
        spark_read.run,
    ),
    "spark_write": (
        "Spark: rows written by local[2] Spark to 3 brokers (RF=3, 6 partitions), and "
        "produce-to-sink latency of a samsa-to-samsa streaming query",
        spark_write.run,
    ),
}


def components(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench components")
    parser.add_argument("--quick", action="store_true", help="small runs for development")
    parser.add_argument("--only", choices=sorted(COMPONENTS), action="append", help="repeatable")
    args = parser.parse_args(argv)
    for name in args.only or COMPONENTS:
        title, run = COMPONENTS[name]
        print_table(title, run(args.quick))


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    family = argv[0] if argv and argv[0] in ("components", "peers") else None
    if family == "components":
        components(argv[1:])
    elif family == "peers":
        peers.main(argv[1:])
    else:
        # Only --quick and --docs go with no family; anything else (--help, a typo) must not
        # start an hour of benchmarks.
        parser = argparse.ArgumentParser(
            prog="python -m bench",
            usage="python -m bench [components|peers] [--quick] ...",
            description="Every benchmark, or one family: components, peers.",
        )
        parser.add_argument("--quick", action="store_true", help="small runs for development")
        parser.add_argument(
            "--docs", metavar="DIR", help="the peers rewrite DIR/benchmarks.md (make bench)"
        )
        args = parser.parse_args(argv)
        quick = ["--quick"] if args.quick else []
        components(quick)
        peers.main([*quick, *(["--docs", args.docs] if args.docs else [])])


if __name__ == "__main__":
    main()
