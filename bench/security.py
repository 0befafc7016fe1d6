"""Security's cost: one standalone broker, librdkafka produce (acks=1), backlog consume and
end-to-end latency at a fixed rate over PLAINTEXT and over SASL_SSL with SCRAM-SHA-512, from the
same run. Over TLS the broker copies fetched records through the encryption instead of
sendfile, and both ends encrypt."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from bench.procs import cpu_seconds
from bench.standalone import consume_backlog, produce_backlog, samsa_broker
from bench.table import Row
from bench.workloads import measure_latency
from samsa_dev.pki import Pki

PARTITIONS = 6
SIZE = 1024
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw";'
RATE = 5_000  # msg/s for the latency rows: well below either listener's peak


@dataclass
class _Broker:
    """The standalone broker as the latency harness's load target."""

    endpoint: str
    client: dict[str, str]
    key: str = "samsa"

    def create_stream(self, name: str, partitions: int) -> None:
        admin = _admin(self.endpoint, self.client)  # kept until its futures are answered
        for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            f.result(30)


def _secured(pki: Pki) -> tuple[dict[str, str], dict[str, str]]:
    keystore = pki.issue("broker", "broker", server=True).keystore
    broker = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
    }
    client = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": "bench-pw",
    }
    return broker, client


def _admin(bootstrap: str, client: dict[str, str]) -> AdminClient:
    """An admin client; over SASL_SSL, the broker's PLAIN admin user."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if client:
        conf |= client | {"sasl.mechanism": "PLAIN", "sasl.username": "admin"}
        conf["sasl.password"] = "admin-pw"
    return AdminClient(conf)


def _prepare(bootstrap: str, client: dict[str, str], topic: str) -> None:
    if client:
        up = UserScramCredentialUpsertion(
            "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bench-pw"
        )
        admin = _admin(bootstrap, client)
        for f in admin.alter_user_scram_credentials([up]).values():
            f.result(30)
    _Broker(bootstrap, client).create_stream(topic, PARTITIONS)


def run(quick: bool = False) -> list[Row]:
    count = 50_000 if quick else 500_000
    seconds = 3.0 if quick else 10.0
    pki = Pki(Path(tempfile.mkdtemp(prefix="samsa-bench-pki-")))
    secured_broker, secured_client = _secured(pki)
    rows: list[Row] = []
    for label, broker, client in (
        ("PLAINTEXT", {}, {}),
        ("SASL_SSL SCRAM-SHA-512", secured_broker, secured_client),
    ):
        os.environ["BENCH_KAFKA_SECURITY"] = json.dumps(client)
        try:
            with samsa_broker({"log.segment.bytes": str(256 << 20), **broker}) as (bootstrap, pid):
                _prepare(bootstrap, client, "bench-sec")
                mb = count * SIZE / 1e6
                cpu0 = cpu_seconds(pid)
                res = produce_backlog(bootstrap, "bench-sec", count, SIZE, "1")
                cpu1 = cpu_seconds(pid)
                rows.append(
                    Row(
                        "produce acks=1",
                        label,
                        SIZE,
                        count / res["seconds"],
                        mb / res["seconds"],
                        cpu_ms_per_mb=(cpu1 - cpu0) * 1000 / mb,
                    )
                )
                res = consume_backlog(bootstrap, "bench-sec", count)
                cpu2 = cpu_seconds(pid)
                rows.append(
                    Row(
                        "consume backlog",
                        label,
                        SIZE,
                        res["count"] / res["seconds"],
                        res["count"] * SIZE / 1e6 / res["seconds"],
                        cpu_ms_per_mb=(cpu2 - cpu1) * 1000 / mb,
                        note=f"{res['errors']} missing" if res["errors"] else "",
                    )
                )
                values, _ = measure_latency(
                    _Broker(bootstrap, client), "bench-sec-e2e", SIZE, RATE, seconds
                )
                rows.append(
                    Row(
                        "e2e latency",
                        label,
                        SIZE,
                        values["rate"],
                        values["rate"] * SIZE / 1e6,
                        p50_ms=values["p50_ms"],
                        p99_ms=values["p99_ms"],
                        p999_ms=values["p999_ms"],
                        note=f"{RATE:,}/s target, acks=1; received {values['received']}",
                    )
                )
        finally:
            os.environ.pop("BENCH_KAFKA_SECURITY", None)
    return rows
