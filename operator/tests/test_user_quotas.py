"""A KafkaUser's quotas: the spec in Kafka's names, the plan that makes the cluster hold exactly
them, and that plan carried out by the operator's admin client against a real broker."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.testing.inprocess import InProcessBroker
from samsa_operator import models, users
from samsa_operator.kafka import ClusterAdmin, KafkaAdminError


def spec(quotas: dict[str, Any] | None) -> models.KafkaUserSpec:
    raw: dict[str, Any] = {"clusterRef": "c", "authentication": {"type": "scram-sha-512"}}
    if quotas is not None:
        raw["quotas"] = quotas
    return models.parse_spec(models.KafkaUserSpec, raw)


def test_quotas_are_kafkas_and_the_plan_sets_changes_and_removes() -> None:
    wanted = users.desired_quotas(spec({"producerByteRate": 1024, "requestPercentage": 55}))
    assert wanted == {"producer_byte_rate": 1024.0, "request_percentage": 55.0}
    assert users.desired_quotas(spec(None)) == {}
    current = {"producer_byte_rate": 2048.0, "consumer_byte_rate": 10.0, "request_percentage": 55}
    assert users.plan_quotas(wanted, current) == {
        "producer_byte_rate": 1024.0,
        "consumer_byte_rate": None,
    }
    assert users.plan_quotas(wanted, wanted) == {}
    assert users.quota_entity("User:CN=bob") == "CN=bob"
    assert users.quota_entity("User:alice") == "alice"


@pytest.mark.parametrize(
    ("quotas", "field"),
    [
        ({"producerByteRate": -1}, "quotas.producerByteRate"),
        ({"requestPercentage": "lots"}, "quotas.requestPercentage"),
        ({"fetchByteRate": 10}, "quotas.fetchByteRate"),
    ],
)
def test_a_quota_kafka_would_refuse_is_refused_in_the_spec(
    quotas: dict[str, Any], field: str
) -> None:
    with pytest.raises(models.SpecError, match=field.replace(".", r"\.")):
        spec(quotas)


async def test_the_admin_client_brings_a_broker_to_the_declared_quotas(
    samsa_broker: InProcessBroker,
) -> None:
    admin = ClusterAdmin(samsa_broker.bootstrap_servers, 15)
    try:
        assert await admin.quotas_of("alice") == {}
        for declared in (
            {"producerByteRate": 1048576, "consumerByteRate": 2097152, "requestPercentage": 50},
            {"consumerByteRate": 4096, "controllerMutationRate": 2.5},
            None,
        ):
            wanted = users.desired_quotas(spec(declared))
            await admin.alter_quotas(
                "alice", users.plan_quotas(wanted, await admin.quotas_of("alice"))
            )
            assert await admin.quotas_of("alice") == wanted
        # Another entity's quotas are its own: a TLS user's, by its certificate's subject.
        await admin.alter_quotas("CN=bob", {"producer_byte_rate": 10.0})
        assert await admin.quotas_of("CN=bob") == {"producer_byte_rate": 10.0}
        assert await admin.quotas_of("alice") == {}
        with pytest.raises(KafkaAdminError, match="unknown_rate") as refused:
            await admin.alter_quotas("alice", {"unknown_rate": 1.0})
        assert not refused.value.retriable
    finally:
        admin.close()
