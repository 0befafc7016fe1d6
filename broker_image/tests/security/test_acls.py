"""ACLs end to end over SASL: a user allowed to write topic a cannot read a, cannot touch b,
cannot join group g and cannot create topics, each with Kafka's error code; Metadata shows only
what it may describe; ACLs outlive a restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
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


class Env:
    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.broker = InProcessBroker(
            root,
            {
                "listeners": f"SASL_PLAINTEXT://127.0.0.1:{self.port}",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": JAAS,
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin",
                "auto.create.topics.enable": "false",
            },
            port=self.port,
        )

    def conf(self, user: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-pw",
        }


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = Env(tmp_path_factory.mktemp("acls"))
    with env.broker:
        admin = AdminClient(env.conf("admin"))
        for f in admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 1, 1)]).values():
            f.result(10)
        write_a = AclBinding(
            ResourceType.TOPIC,
            "a",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        )
        # Group "reader" is alice's, so reading a is refused for the topic, not the group.
        read_reader = AclBinding(
            ResourceType.GROUP,
            "reader",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        for f in admin.create_acls([write_a, read_reader]).values():
            f.result(10)
        yield env


def _consumer_error(conf: dict[str, Any], subscribe: bool) -> KafkaError:
    group = "g" if subscribe else "reader"
    consumer = Consumer(conf | {"group.id": group, "auto.offset.reset": "earliest"})
    try:
        if subscribe:
            consumer.subscribe(["a"])
        else:
            consumer.assign([TopicPartition("a", 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            error = msg.error() if msg is not None else None
            if error is not None:
                return error
        raise AssertionError("no error within 30 s")
    finally:
        consumer.close()


def test_alice_may_write_a(env: Env) -> None:
    producer = Producer(env.conf("alice"))
    reports: list[Any] = []
    producer.produce("a", b"hello", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(30)
    assert reports == [None]


def test_alice_may_not_write_b(env: Env) -> None:
    producer = Producer(env.conf("alice"))
    reports: list[Any] = []
    producer.produce("b", b"no", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(30)
    assert [e.code() for e in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_alice_may_not_read_a(env: Env) -> None:
    assert _consumer_error(env.conf("alice"), subscribe=False).code() == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )


def test_alice_may_not_join_group_g(env: Env) -> None:
    assert _consumer_error(env.conf("alice"), subscribe=True).code() == (
        KafkaError.GROUP_AUTHORIZATION_FAILED
    )


def test_alice_may_not_create_topics(env: Env) -> None:
    admin = AdminClient(env.conf("alice"))
    with pytest.raises(Exception) as info:
        admin.create_topics([NewTopic("c", 1, 1)])["c"].result(10)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_alice_may_not_manage_acls(env: Env) -> None:
    admin = AdminClient(env.conf("alice"))
    read_a = AclBinding(
        ResourceType.TOPIC,
        "a",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(Exception) as info:
        admin.create_acls([read_a])[read_a].result(10)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    test_alice_may_not_read_a(env)


def test_metadata_shows_alice_only_what_she_may_describe(env: Env) -> None:
    seen = AdminClient(env.conf("alice")).list_topics(timeout=10).topics
    assert set(seen) == {"a"}
    assert {"a", "b"} <= set(AdminClient(env.conf("admin")).list_topics(timeout=10).topics)


def test_acls_survive_a_restart(env: Env) -> None:
    env.broker.restart()
    admin = AdminClient(env.conf("admin"))
    anything: Any = None  # the stubs say str; None is "any" in a filter
    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            anything,
            ResourcePatternType.ANY,
            "User:alice",
            anything,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(10)
    assert sorted((b.name, b.operation, b.permission_type) for b in found) == [
        ("a", AclOperation.WRITE, AclPermissionType.ALLOW),
        ("reader", AclOperation.READ, AclPermissionType.ALLOW),
    ]
    test_alice_may_write_a(env)


def _sasl_wire(env: Env, user: str) -> Any:
    from kafka_support import Wire
    from kio.index import load_request_schema

    wire = Wire(env.port)
    handshake = wire.request(17, 1, load_request_schema(17, 1)(mechanism="PLAIN"))
    assert int(handshake.error_code.value) == 0
    token = b"\0" + user.encode() + b"\0" + f"{user}-pw".encode()
    auth = wire.request(36, 2, load_request_schema(36, 2)(auth_bytes=token))
    assert int(auth.error_code.value) == 0
    return wire


def test_only_brokers_may_write_transaction_markers(env: Env) -> None:
    from txn_support import (
        CLUSTER_AUTHORIZATION_FAILED,
        NONE,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        Marker,
        produce,
        txn_batch,
        write_markers,
    )

    with _sasl_wire(env, "alice") as wire:
        # Alice may write topic a, but not as transactional id "app".
        assert produce(wire, "a", txn_batch(500, 0, [b"t"]))[0] == (
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        refused = write_markers(wire, [Marker(500, False, {"a": [0]})])
        assert refused == {(500, "a", 0): CLUSTER_AUTHORIZATION_FAILED}
    with _sasl_wire(env, "admin") as wire:
        assert write_markers(wire, [Marker(500, False, {"a": [0]})]) == {(500, "a", 0): NONE}
