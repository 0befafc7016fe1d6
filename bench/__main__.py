"""`python -m bench [--quick]`: run every benchmark and print its table."""

from __future__ import annotations

import argparse

from bench import broker_core
from bench.report import print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small runs for development")
    args = parser.parse_args()
    print_table("Broker core: one broker, librdkafka", broker_core.run(args.quick))


if __name__ == "__main__":
    main()
