"""``python -m chaos --faults N | --duration S --seed SEED --brokers 3|5 --report PATH``; exits
non-zero when the checker finds a violated guarantee."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from chaos.runner import Campaign, rejudge, run, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    limit = parser.add_mutually_exclusive_group(required=True)
    limit.add_argument("--faults", type=int, help="how many faults to inject")
    limit.add_argument("--duration", type=float, help="seconds of nemesis")
    limit.add_argument(
        "--check", type=Path, metavar="WORKDIR", help="judge a kept campaign's logs again"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--brokers", type=int, choices=(3, 5), default=3)
    parser.add_argument("--report", type=Path, help="where to write the markdown report")
    parser.add_argument("--workdir", type=Path, help="cluster data and logs (kept)")
    parser.add_argument(
        "--no-network",
        action="store_true",
        help="run every node on 127.0.0.1, without network namespaces (and network faults)",
    )
    args = parser.parse_args(argv)

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # the cluster is torn down by the finally clauses

    signal.signal(signal.SIGTERM, terminate)
    if args.check is not None:
        outcome = rejudge(args.check)
    else:
        outcome = run(
            Campaign(
                faults=args.faults,
                duration=args.duration,
                seed=args.seed,
                brokers=args.brokers,
                workdir=args.workdir,
                network=not args.no_network,
            )
        )
    if args.report:
        write_report(outcome, args.report)
    v = outcome.verdict
    print(
        f"faults {sum(v.faults.values())} {v.faults}; acked {v.total('acked')}, "
        f"lost {v.total('lost')}, duplicates {v.total('duplicates')}, "
        f"reordered {v.total('reordered')}, offset mismatches {v.total('offset_mismatch')}, "
        f"offsets backwards {v.total('offsets_backwards')}, unacked read "
        f"{v.total('unacked_read')}, acks=1 lost {v.total('acks1_lost')}; "
        f"gaps {v.gaps_by_kind}; unrecovered {outcome.unrecovered}; "
        f"load failures {outcome.load_failures}",
        flush=True,
    )
    for message, count in list(outcome.broker_errors.items())[:10]:
        print(f"  broker error x{count}: {message}")
    for example in v.examples[:20]:
        print("  " + example)
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
