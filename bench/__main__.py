"""`python -m bench [--quick] [--only NAME]`: run the benchmarks and print their tables."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from bench import broker_core, cleaner, groups, spark_read
from bench.report import Row, print_table

BENCHMARKS: dict[str, tuple[str, Callable[[bool], list[Row]]]] = {
    "broker_core": ("Broker core: one broker, librdkafka, acks=1", broker_core.run),
    "groups": ("Consumer groups: 3 librdkafka members, 6 partitions, 100 B records", groups.run),
    "cleaner": (
        "Log cleaner: one log, cleaned on the event loop; p50-p99.9 = loop lag meanwhile",
        cleaner.run,
    ),
    "spark": (
        "Spark: rows read into local[2] Spark from a 6-partition topic, beside Parquet",
        spark_read.run,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small runs for development")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append", help="repeatable")
    args = parser.parse_args()
    for name in args.only or BENCHMARKS:
        title, run = BENCHMARKS[name]
        print_table(title, run(args.quick))


if __name__ == "__main__":
    main()
