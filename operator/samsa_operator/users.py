"""A KafkaUser, pure: its principal, its Secret's data (a generated SCRAM password, or a
client certificate from the clients CA), and the ACLs to create and delete and the client
quotas to set and remove so the cluster holds exactly the ones its spec declares.
"""

from __future__ import annotations

import datetime
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from samsa_operator import certs, security
from samsa_operator.certs import KeyPair
from samsa_operator.models import AclRule, KafkaUserSpec

SCRAM_ITERATIONS = 4096
PASSWORD_BYTES = 24
JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
    'password="{password}";'
)

# Kafka's names of resource types, as confluent-kafka's enums spell them.
_RESOURCE_TYPES = {
    "topic": "TOPIC",
    "group": "GROUP",
    "cluster": "BROKER",
    "transactionalId": "TRANSACTIONAL_ID",
}
_PATTERNS = {"literal": "LITERAL", "prefix": "PREFIXED"}
CLUSTER_RESOURCE = "kafka-cluster"


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL binding, by the enum names of confluent-kafka's admin API."""

    resource_type: str
    name: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str


def _snake_upper(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()


def rule_acls(rule: AclRule, principal: str) -> list[Acl]:
    kind = rule.resource.type
    name = CLUSTER_RESOURCE if kind == "cluster" else rule.resource.name
    pattern = "LITERAL" if kind == "cluster" else _PATTERNS[rule.resource.pattern_type]
    return [
        Acl(
            _RESOURCE_TYPES[kind],
            name,
            pattern,
            principal,
            rule.host,
            _snake_upper(op),
            rule.type.upper(),
        )
        for op in rule.operations
    ]


def desired_acls(spec: KafkaUserSpec, principal: str) -> set[Acl]:
    rules = spec.authorization.acls if spec.authorization else []
    return {acl for rule in rules for acl in rule_acls(rule, principal)}


@dataclass(frozen=True)
class AclPlan:
    create: list[Acl]
    delete: list[Acl]


def plan_acls(desired: Iterable[Acl], current: Iterable[Acl]) -> AclPlan:
    """What to create and delete so the cluster holds exactly `desired`."""
    want, have = set(desired), set(current)
    return AclPlan(sorted(want - have), sorted(have - want))


def principal(username: str, spec: KafkaUserSpec) -> str:
    return security.user_principal(username, spec.authentication.type)


def quota_entity(principal: str) -> str:
    """The user entity a principal's quotas are kept under: its name, as Kafka's quota
    callback takes it (`alice`, or a TLS user's `CN=bob`)."""
    return principal.removeprefix("User:")


def desired_quotas(spec: KafkaUserSpec) -> dict[str, float]:
    """The spec's quotas by Kafka's names (the model's field names are Kafka's)."""
    if spec.quotas is None:
        return {}
    return {k: float(v) for k, v in spec.quotas.model_dump().items() if v is not None}


def plan_quotas(
    desired: Mapping[str, float], current: Mapping[str, float]
) -> dict[str, float | None]:
    """The AlterClientQuotas operations that make `current` equal `desired`: a value to set,
    or None to remove."""
    plan: dict[str, float | None] = {k: v for k, v in desired.items() if current.get(k) != v}
    plan.update({k: None for k in current.keys() - desired.keys()})
    return plan


def new_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


def scram_secret(username: str, existing: Mapping[str, str]) -> dict[str, str]:
    """The Secret's data for a SCRAM user: its password kept, or a new one."""
    password = existing.get("password") or new_password()
    return {
        "username": username,
        "password": password,
        "sasl.jaas.config": JAAS.format(user=username, password=password),
    }


def tls_secret(
    username: str,
    existing: Mapping[str, str],
    clients_ca: KeyPair,
    now: datetime.datetime,
    validity_days: int,
    renewal_days: int,
) -> dict[str, str]:
    """The Secret's data for a TLS user: its certificate kept while the clients CA signed it
    and it is not due for renewal, or a new one (subject CN=<user>)."""
    cert, key = existing.get("user.crt"), existing.get("user.key")
    if (
        cert is None
        or key is None
        or not certs.signed_by(cert, clients_ca)
        or certs.renewable(cert, clients_ca, now, renewal_days)
    ):
        issued = certs.issue(clients_ca, certs.name(username), now, validity_days, server=False)
        cert, key = issued.cert, issued.key
    return {
        "username": username,
        "user.crt": cert,
        "user.key": key,
        "user.pem": KeyPair(key, cert).keystore,
        "ca.crt": clients_ca.cert,
    }


def credentials_fingerprint(data: Mapping[str, str]) -> str:
    return certs.fingerprint(data.get("password", ""), data.get("user.crt", ""))
