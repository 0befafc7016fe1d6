"""`python -m bench [--quick]`: run every benchmark and print its table."""

from __future__ import annotations

import argparse

from bench import broker_core, spark_read
from bench.report import print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small runs for development")
    args = parser.parse_args()
    print_table("Broker core: one broker, librdkafka, acks=1", broker_core.run(args.quick))
    print_table(
        "Spark: rows read into local[2] Spark from a 6-partition topic, beside Parquet",
        spark_read.run(args.quick),
    )


if __name__ == "__main__":
    main()
