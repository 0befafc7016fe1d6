"""`python -m bench.clients SYSTEM MODE ...`: one load generator run in its own process, so it
has a core of its own and no share of the harness's interpreter. Prints JSON lines: `{"ready":
true}` where the harness must wait for it, then the result.

Modes, the same for every system:
  produce       COUNT messages of SIZE bytes, as fast as the client goes
  consume       COUNT messages from the start of the stream
  e2e-produce   RATE messages a second for SECONDS, each stamped with its send time
  e2e-consume   reads the stamped messages and reports latency percentiles and a CDF
  probe         writes one at a time; the harness writes the kill time on stdin; reports
                how long after it a write first succeeded
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import resource
import sys

from bench.clients.common import KillTime, Probe, emit

# Imported on demand: each process needs one client library, and imports cost a start-up.
CLIENTS = {
    "samsa": "bench.clients.kafka_client",
    "kafka": "bench.clients.kafka_client",
    "nats": "bench.clients.nats_client",
    "redis": "bench.clients.redis_client",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("system", choices=sorted(CLIENTS))
    parser.add_argument(
        "mode", choices=["produce", "consume", "e2e-produce", "e2e-consume", "probe"]
    )
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument(
        "--acks", default="all", help="Kafka only: acks for `produce` and `e2e-produce`"
    )
    parser.add_argument(
        "--idempotence", action="store_true", help="Kafka only: enable.idempotence for `produce`"
    )
    parser.add_argument(
        "--compressible",
        action="store_true",
        help="Kafka only: `produce` text that compresses, not random bytes",
    )
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--idle", type=float, default=5.0, help="e2e-consume gives up after")
    args = parser.parse_args()
    client = importlib.import_module(CLIENTS[args.system])
    e, s = args.endpoint, args.stream
    if args.mode == "produce":
        extra = (
            {"acks": args.acks, "idempotence": args.idempotence, "compressible": args.compressible}
            if args.system in ("samsa", "kafka")
            else {}
        )
        call = client.produce(e, s, args.count, args.size, **extra)
    elif args.mode == "consume":
        call = client.consume(e, s, args.count)
    elif args.mode == "e2e-produce":
        # Started beside the consumer; the harness says when to go, once both are up.
        emit({"ready": True})
        sys.stdin.readline()
        acks = {"acks": args.acks} if args.system == "samsa" else {}
        call = client.e2e_produce(e, s, args.rate, args.seconds, args.size, **acks)
    elif args.mode == "e2e-consume":
        call = client.e2e_consume(e, s, args.count, args.idle)
    else:
        call = client.probe(e, s, Probe(KillTime()))
    result = asyncio.run(call) if inspect.iscoroutine(call) else call
    usage = resource.getrusage(resource.RUSAGE_SELF)
    emit({**result, "client_cpu_s": usage.ru_utime + usage.ru_stime})


if __name__ == "__main__":
    main()
