"""`samsa-operator`: run the operator (the operator image's entry point).

Settings come from flags or, as the Helm chart sets them, from the environment:
SAMSA_OPERATOR_WATCH_NAMESPACES (comma-separated; empty: every namespace),
SAMSA_OPERATOR_PEERING (a kopf peering name, so one replica is active; empty: standalone),
SAMSA_OPERATOR_BROKER_IMAGE, SAMSA_OPERATOR_RESYNC_SECONDS, SAMSA_OPERATOR_OPERATION_SECONDS
(how often day-2 operations take a step), SAMSA_OPERATOR_HEALTH_PORT,
SAMSA_OPERATOR_METRICS_PORT (Prometheus /metrics: reconciliations by kind),
SAMSA_OPERATOR_NETWORK_POLICIES (true: a NetworkPolicy per KafkaCluster).
"""

from __future__ import annotations

import argparse
import os
import sys

PROG = "samsa-operator"


def parse_args(argv: list[str]) -> argparse.Namespace:
    env = os.environ
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run the Samsa operator for KafkaCluster, Topic and KafkaUser resources.",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[n for n in env.get("SAMSA_OPERATOR_WATCH_NAMESPACES", "").split(",") if n],
        help="Namespace to watch (repeatable); every namespace if none is given.",
    )
    parser.add_argument(
        "--peering",
        default=env.get("SAMSA_OPERATOR_PEERING", ""),
        help="kopf peering name: replicas elect one active operator. Empty: standalone.",
    )
    parser.add_argument(
        "--health-port",
        type=int,
        default=env.get("SAMSA_OPERATOR_HEALTH_PORT") or 8080,
        help="Port of the liveness endpoint /healthz (0: none).",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=env.get("SAMSA_OPERATOR_METRICS_PORT") or 8081,
        help="Port of the Prometheus endpoint /metrics (0: none).",
    )
    parser.add_argument("--verbose", action="store_true", help="Debug logging.")
    return parser.parse_args(argv)


def check_environment() -> None:
    """Numbers in the environment are checked before anything starts."""
    for name in (
        "SAMSA_OPERATOR_RESYNC_SECONDS",
        "SAMSA_OPERATOR_KAFKA_TIMEOUT",
        "SAMSA_OPERATOR_OPERATION_SECONDS",
    ):
        value = os.environ.get(name)
        try:
            if value is not None and float(value) <= 0:
                raise ValueError
        except ValueError:
            sys.exit(f"{PROG}: error: {name}={value!r} is not a positive number of seconds")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    check_environment()
    import kopf

    # Registering the handlers: the clusters' and topics' (through day2_driver), their day-2
    # operations', and the KafkaUsers'.
    import samsa_operator.day2_driver
    import samsa_operator.kafkausers  # noqa: F401
    from samsa_operator import metrics

    kopf.configure(verbose=args.verbose)
    # On the pod's IP when the chart gives it (the kubelet probes that address).
    host = os.environ.get("POD_IP") or "0.0.0.0"
    liveness = f"http://{host}:{args.health_port}/healthz" if args.health_port else None
    if args.metrics_port:
        metrics.serve(host, args.metrics_port)
    kopf.run(
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        standalone=not args.peering,
        peering_name=args.peering or None,
        liveness_endpoint=liveness,
    )


if __name__ == "__main__":
    main()
