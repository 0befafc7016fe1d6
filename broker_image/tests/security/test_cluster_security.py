"""A 3-broker cluster whose one listener is SASL_SSL with client certificates required, so the
replica fetchers, the controller's channel and the liveness probes authenticate too (PLAIN
between brokers, mutual TLS underneath), while clients use SCRAM-SHA-512."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from security_support import Pki, confluent_round_trip

from samsa.testing.cluster import replicated_cluster

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-pw" user_broker="broker-pw";'
)


def test_replication_over_a_secured_inter_broker_listener(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    broker = pki.issue("broker", "broker", server=True)
    client = pki.issue("client", "client")
    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL",
        "ssl.keystore.location": str(broker.keystore),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": JAAS,
    }
    with replicated_cluster(tmp_path / "cluster", 3, overrides) as cluster:
        tls = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(client.cert),
            "ssl.key.location": str(client.key),
        }
        admin = AdminClient(
            tls
            | {"sasl.mechanism": "PLAIN", "sasl.username": "broker", "sasl.password": "broker-pw"}
        )
        up = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw"
        )
        for f in admin.alter_user_scram_credentials([up]).values():
            f.result(30)
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(30)
        alice = tls | {
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-pw",
            "acks": "all",
        }
        got = confluent_round_trip(alice, "replicated", 20)
        assert got == [f"v{i}".encode() for i in range(20)]
        # acks=all succeeded with min.insync.replicas=2: a follower fetched over SASL_SSL.
        meta = admin.list_topics("replicated", timeout=10).topics["replicated"].partitions[0]
        assert len(meta.replicas) == 3 and len(meta.isrs) >= 2
