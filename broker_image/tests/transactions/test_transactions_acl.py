"""Transactional ids under ACLs (over SASL): without WRITE on its transactional id a producer
cannot start (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, fatal); with it, it commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from samsa.testing import InProcessBroker, free_port

pytestmark = pytest.mark.timeout(120)
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-pw" user_alice="alice-pw";'
)


def test_transactional_id_needs_write(tmp_path: Path) -> None:
    port = free_port()
    broker = InProcessBroker(
        tmp_path,
        {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "transaction.state.log.num.partitions": "2",
        },
        port=port,
    )

    def conf(user: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-pw",
        }

    def allow(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
        return AclBinding(
            rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW
        )

    with broker:
        admin = AdminClient(conf("admin"))
        admin.create_topics([NewTopic("a", 1, 1)])["a"].result(30)
        for f in admin.create_acls([allow(ResourceType.TOPIC, "a", AclOperation.WRITE)]).values():
            f.result(30)
        refused = Producer(conf("alice") | {"transactional.id": "t1"})
        with pytest.raises(KafkaException) as info:
            refused.init_transactions(30)
        err = info.value.args[0]
        assert err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and err.fatal()

        grant = allow(ResourceType.TRANSACTIONAL_ID, "t1", AclOperation.WRITE)
        for f in admin.create_acls([grant]).values():
            f.result(30)
        p = Producer(conf("alice") | {"transactional.id": "t1"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("a", b"allowed", partition=0)
        p.commit_transaction(30)
