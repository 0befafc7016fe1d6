"""Talking to a Kafka cluster (Samsa or Apache Kafka) through the admin protocol.

confluent-kafka's AdminClient does the wire work; kafka-python's KafkaAdminClient does the
APIs librdkafka lacks (AlterPartitionReassignments, ListPartitionReassignments,
DescribeClientQuotas, AlterClientQuotas). This module
turns their futures and blocking calls into awaitables and their results into the plain
values of `reconcile`, `rolling` and `operations`. It is the only module that speaks Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import (
    ResourceType as KafkaResourceType,
)

from samsa_operator.day2_planner import KafkaView
from samsa_operator.rebalance import Plan
from samsa_operator.reconcile import (
    Assignment,
    Broker,
    ClusterInfo,
    Load,
    PartitionState,
    TopicState,
)
from samsa_operator.rolling import DEFAULT, DYNAMIC, STATIC, ReportedConfig
from samsa_operator.security import ClientTls
from samsa_operator.users import Acl

TIMEOUT = 15.0
ABSENT = object()  # what _wait gives for a topic the cluster does not have
log = logging.getLogger(__name__)
# kafka-python logs every refused connection with a traceback, at ERROR: brokers restarting
# in a roll do that by design, and the operator reports what fails itself.
logging.getLogger("kafka").setLevel(logging.CRITICAL)


class KafkaAdminError(Exception):
    """An admin request failed; `retriable` says whether trying again may help."""

    def __init__(self, message: str, retriable: bool = True, code: int | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.code = code  # Kafka's error code, when the brokers answered with one


_TRANSIENT = (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN)


def _error(exc: BaseException, what: str) -> KafkaAdminError:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        transient = err.retriable() or err.code() in _TRANSIENT
        return KafkaAdminError(f"{what}: {err.str()}", bool(transient), err.code())
    return KafkaAdminError(f"{what}: {exc}")


def _unknown_topic(exc: BaseException) -> bool:
    return (
        isinstance(exc, KafkaException)
        and bool(exc.args)
        and isinstance(exc.args[0], KafkaError)
        and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    )


class KafkaAdmin:
    """An admin connection to one cluster; every call is bounded by TIMEOUT."""

    def __init__(
        self, bootstrap_servers: str, timeout: float = TIMEOUT, tls: ClientTls | None = None
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        self.tls = tls
        self._racks: dict[int, str | None] = {}  # by broker id, as DescribeCluster said
        self._kafka_python_client: Any = None  # kafka-python's client, made on first use
        self._kafka_python_lock = threading.Lock()
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "socket.timeout.ms": int(timeout * 1000),
            "client.id": "samsa-operator",
        }
        if tls is not None:  # mutual TLS on the replication listener: a super user
            config.update(
                {
                    "security.protocol": "SSL",
                    "ssl.ca.pem": tls.ca,
                    "ssl.certificate.pem": tls.cert,
                    "ssl.key.pem": tls.key,
                }
            )
        self._client = AdminClient(config, logger=log)

    async def _wait(
        self, future: Future[Any], what: str, absent_ok: bool = False, seconds: float = 0
    ) -> Any:
        """The future's result; ABSENT for an unknown topic when absent_ok."""
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), seconds or self.timeout)
        except TimeoutError:
            raise KafkaAdminError(f"{what}: no answer from {self.bootstrap_servers}") from None
        except KafkaException as exc:
            if absent_ok and _unknown_topic(exc):
                return ABSENT
            raise _error(exc, what) from None

    async def describe_cluster(self, seconds: float = 0) -> ClusterInfo:
        """DescribeCluster: it waits for a controller, so it hangs while the controller moves;
        `cluster_info` does not."""
        seconds = seconds or self.timeout
        result = await self._wait(
            self._client.describe_cluster(request_timeout=seconds),
            "describe cluster",
            seconds=seconds,
        )
        return ClusterInfo(
            cluster_id=result.cluster_id,
            controller_id=result.controller.id if result.controller is not None else None,
            brokers=sorted((Broker(n.id, n.rack or None) for n in result.nodes), key=_by_id),
        )

    async def metadata(self) -> Any:
        """Brokers, controller and every topic's partitions, from any broker."""
        try:
            return await asyncio.to_thread(self._client.list_topics, timeout=self.timeout)
        except KafkaException as exc:
            raise _error(exc, "metadata") from None

    async def cluster_info(self, metadata: Any = None) -> ClusterInfo:
        """Cluster id, controller and brokers from the metadata, which any broker answers
        even while the controller moves. Racks come from DescribeCluster, asked only when a
        broker id is new to this client (a broker's rack stays with it)."""
        metadata = metadata or await self.metadata()
        ids = sorted(metadata.brokers)
        if any(i not in self._racks for i in ids):
            with contextlib.suppress(KafkaAdminError):
                described = await self.describe_cluster(seconds=min(self.timeout, 2.0))
                self._racks.update({b.id: b.rack for b in described.brokers})
        controller = metadata.controller_id if metadata.controller_id >= 0 else None
        return ClusterInfo(
            cluster_id=metadata.cluster_id,
            controller_id=controller,
            brokers=[Broker(i, self._racks.get(i)) for i in ids],
        )

    async def cluster_load(self) -> Load:
        """Replicas and preferred leaders per broker, over every topic."""
        metadata = await self.metadata()
        return Load.of(
            {p.id: list(p.replicas) for p in t.partitions.values()}
            for t in metadata.topics.values()
        )

    async def describe_topic(self, name: str) -> TopicState | None:
        futures = self._client.describe_topics(
            TopicCollection([name]), request_timeout=self.timeout
        )
        desc = await self._wait(futures[name], f"describe topic {name}", absent_ok=True)
        if desc is ABSENT:
            return None
        assignment = {p.id: [r.id for r in p.replicas] for p in desc.partitions}
        topic_id = str(desc.topic_id) if getattr(desc, "topic_id", None) is not None else None
        config = await self.topic_config(name)
        return TopicState(name=name, assignment=assignment, config=config, topic_id=topic_id)

    async def topic_config(self, name: str) -> dict[str, str]:
        """The topic's own configs (set on the topic), not broker defaults."""
        resource = ConfigResource(KafkaResourceType.TOPIC, name)
        futures = self._client.describe_configs([resource], request_timeout=self.timeout)
        entries: Mapping[str, ConfigEntry] = await self._wait(
            futures[resource], f"describe configs of {name}"
        )
        return {
            k: e.value
            for k, e in entries.items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None
        }

    async def create_topic(
        self, name: str, assignment: Assignment, config: Mapping[str, str]
    ) -> None:
        new = NewTopic(
            name,
            num_partitions=len(assignment),
            replication_factor=-1,
            replica_assignment=[assignment[p] for p in sorted(assignment)],
            config=dict(config),
        )
        futures = self._client.create_topics([new], request_timeout=self.timeout)
        await self._wait(futures[name], f"create topic {name}")

    async def create_partitions(self, name: str, total: int, new: Assignment) -> None:
        request = NewPartitions(name, total, replica_assignment=[new[p] for p in sorted(new)])
        futures = self._client.create_partitions([request], request_timeout=self.timeout)
        await self._wait(futures[name], f"add partitions to {name}")

    async def alter_topic_config(
        self, name: str, set_: Mapping[str, str], delete: Sequence[str]
    ) -> None:
        ops = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()
        ]
        ops += [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete
        ]
        resource = ConfigResource(KafkaResourceType.TOPIC, name, incremental_configs=ops)
        futures = self._client.incremental_alter_configs([resource], request_timeout=self.timeout)
        await self._wait(futures[resource], f"alter configs of {name}")

    async def delete_topic(self, name: str) -> bool:
        """Delete a topic; False if there was none."""
        futures = self._client.delete_topics([name], request_timeout=self.timeout)
        return await self._wait(futures[name], f"delete topic {name}", absent_ok=True) is not ABSENT

    # -- users: SCRAM credentials and ACLs -----------------------------------------------------

    async def has_scram_credential(self, user: str) -> bool:
        """DescribeUserScramCredentials: whether the user has a SCRAM-SHA-512 credential."""
        futures: dict[str, Future[Any]] = self._client.describe_user_scram_credentials([user])  # type: ignore[assignment]
        try:
            found = await self._wait(futures[user], f"describe credentials of {user}")
        except KafkaAdminError as exc:
            if exc.code == KafkaError.RESOURCE_NOT_FOUND:
                return False
            raise
        infos = getattr(found, "scram_credential_infos", None) or []
        return any(i.mechanism == ScramMechanism.SCRAM_SHA_512 for i in infos)

    async def set_scram_credential(self, user: str, password: str, iterations: int) -> None:
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, iterations)
        change = UserScramCredentialUpsertion(user, info, password.encode())
        futures = self._client.alter_user_scram_credentials([change])
        await self._wait(futures[user], f"set the credentials of {user}")

    async def delete_scram_credential(self, user: str) -> bool:
        """Remove the user's SCRAM-SHA-512 credential; False if there was none."""
        change = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
        futures = self._client.alter_user_scram_credentials([change])
        try:
            await self._wait(futures[user], f"delete the credentials of {user}")
        except KafkaAdminError as exc:
            if exc.code == KafkaError.RESOURCE_NOT_FOUND:
                return False
            raise
        return True

    async def acls_of(self, principal: str) -> set[Acl]:
        """DescribeAcls: every ACL naming the principal."""
        # No name and no host: any (the binding's annotations say str, librdkafka takes NULL).
        query = AclBindingFilter(
            KafkaResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            principal,
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        found = await self._wait(
            self._client.describe_acls(query, request_timeout=self.timeout),
            f"describe the ACLs of {principal}",
        )
        return {_acl(b) for b in found}

    async def create_acls(self, acls: Sequence[Acl]) -> None:
        if not acls:
            return
        futures = self._client.create_acls(
            [_binding(a, AclBinding) for a in acls], request_timeout=self.timeout
        )
        for future in futures.values():
            await self._wait(future, "create ACLs")

    async def delete_acls(self, acls: Sequence[Acl]) -> None:
        if not acls:
            return
        futures = self._client.delete_acls(
            [_binding(a, AclBindingFilter) for a in acls], request_timeout=self.timeout
        )
        for future in futures.values():
            await self._wait(future, "delete ACLs")


def _acl(binding: Any) -> Acl:
    return Acl(
        resource_type=binding.restype.name,
        name=binding.name,
        pattern=binding.resource_pattern_type.name,
        principal=binding.principal,
        host=binding.host,
        operation=binding.operation.name,
        permission=binding.permission_type.name,
    )


def _binding(acl: Acl, cls: Any) -> Any:
    return cls(
        KafkaResourceType[acl.resource_type],
        acl.name,
        ResourcePatternType[acl.pattern],
        acl.principal,
        acl.host,
        AclOperation[acl.operation],
        AclPermissionType[acl.permission],
    )


def _by_id(broker: Broker) -> int:
    return broker.id


# Config sources of DescribeConfigs, as `rolling` names them.
_SOURCES = {
    ConfigSource.DYNAMIC_BROKER_CONFIG.value: DYNAMIC,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value: DYNAMIC,
    ConfigSource.STATIC_BROKER_CONFIG.value: STATIC,
}


def _source(source: Any) -> str:
    return _SOURCES.get(int(getattr(source, "value", source)), DEFAULT)


class ClusterAdmin(KafkaAdmin):
    """The admin calls of day-2 operations: the cluster's partitions, brokers' configs,
    reassignments and preferred-leader elections."""

    async def observe(self) -> KafkaView:
        """Controller, registered brokers, every partition (internal topics included) with
        its ISR and min.insync.replicas, and the partitions being reassigned."""
        metadata = await self.metadata()
        info = await self.cluster_info(metadata)
        names = sorted(t for t, m in metadata.topics.items() if m.error is None)
        min_isr = await self._min_insync_replicas(names)
        partitions = [
            PartitionState(
                topic=t,
                partition=p.id,
                replicas=list(p.replicas),
                isr=list(p.isrs),
                leader=p.leader if p.leader >= 0 else None,
                min_insync_replicas=min_isr.get(t, 1),
            )
            for t in names
            if t in min_isr
            for p in sorted(metadata.topics[t].partitions.values(), key=lambda p: p.id)
        ]
        moving = await self.reassignments()
        return KafkaView(info.controller_id, info.brokers, partitions, frozenset(moving))

    async def _min_insync_replicas(self, topics: Sequence[str]) -> dict[str, int]:
        """min.insync.replicas of each topic that still exists."""
        if not topics:
            return {}
        resources = [ConfigResource(KafkaResourceType.TOPIC, t) for t in topics]
        futures = self._client.describe_configs(resources, request_timeout=self.timeout)
        out = {}
        for resource, future in futures.items():
            entries = await self._wait(future, f"describe configs of {resource.name}", True)
            if entries is ABSENT:
                continue  # deleted since the metadata was read
            entry = entries.get("min.insync.replicas")
            out[resource.name] = int(entry.value) if entry is not None and entry.value else 1
        return out

    async def broker_config(self, broker_id: int) -> dict[str, ReportedConfig]:
        """What one broker runs: each config with its value, source and whether it can
        change live."""
        resource = ConfigResource(KafkaResourceType.BROKER, str(broker_id))
        futures = self._client.describe_configs([resource], request_timeout=self.timeout)
        entries: Mapping[str, ConfigEntry] = await self._wait(
            futures[resource], f"describe configs of broker {broker_id}"
        )
        return {
            name: ReportedConfig(e.value, _source(e.source), bool(e.is_read_only))
            for name, e in entries.items()
        }

    async def alter_broker_config(
        self, broker_id: int, set_: Mapping[str, str], delete: Sequence[str] = ()
    ) -> None:
        ops = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()
        ]
        ops += [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete
        ]
        resource = ConfigResource(KafkaResourceType.BROKER, str(broker_id), incremental_configs=ops)
        futures = self._client.incremental_alter_configs([resource], request_timeout=self.timeout)
        await self._wait(futures[resource], f"alter configs of broker {broker_id}")

    async def elect_preferred(self, partitions: Sequence[tuple[str, int]]) -> dict[str, str]:
        """ElectLeaders(PREFERRED); the partitions that failed, with why (an election that
        is not needed is no failure)."""
        tps = [ConfluentTopicPartition(t, p) for t, p in partitions]
        # No request_timeout here: confluent-kafka 2.16's binding rejects it (SystemError).
        future = self._client.elect_leaders(ElectionType.PREFERRED, tps)
        results: Mapping[Any, Any] = await self._wait(future, "elect preferred leaders")
        failed = {}
        for tp, err in results.items():
            if err is not None and err.code() != KafkaError.ELECTION_NOT_NEEDED:
                failed[f"{tp.topic}-{tp.partition}"] = err.str()
        return failed

    def _kafka_python(self) -> Any:
        from kafka.admin import KafkaAdminClient

        if self._kafka_python_client is None:
            options: dict[str, Any] = {}
            if self.tls is not None:
                options = {"security_protocol": "SSL", "ssl_context": _ssl_context(self.tls)}
            self._kafka_python_client = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers.split(","),
                client_id="samsa-operator",
                request_timeout_ms=int(self.timeout * 1000),
                **options,
            )
        return self._kafka_python_client

    def _kafka_python_call(self, what: str, call: Any) -> Any:
        with self._kafka_python_lock:
            try:
                return call(self._kafka_python())
            except Exception as exc:  # kafka-python raises many types; drop the client
                if self._kafka_python_client is not None:
                    self._kafka_python_client.close()
                    self._kafka_python_client = None
                raise KafkaAdminError(f"{what}: {exc!r}") from None

    async def reassignments(self) -> set[tuple[str, int]]:
        """The partitions being reassigned (ListPartitionReassignments)."""
        found = await asyncio.to_thread(
            self._kafka_python_call,
            "list partition reassignments",
            lambda c: c.list_partition_reassignments(),
        )
        return {(tp.topic, tp.partition) for tp in found}

    async def reassign(self, plan: Plan) -> None:
        """AlterPartitionReassignments; fails if the controller refuses any partition."""
        from kafka import TopicPartition as KafkaTopicPartition

        targets = {KafkaTopicPartition(t, p): list(r) for (t, p), r in plan.items()}
        results = await asyncio.to_thread(
            self._kafka_python_call,
            "alter partition reassignments",
            lambda c: c.alter_partition_reassignments(targets),
        )
        refused = {f"{tp.topic}-{tp.partition}": err for tp, err in results.items() if err}
        if refused:
            raise KafkaAdminError(f"reassignment refused: {refused}", retriable=True)

    async def quotas_of(self, user: str) -> dict[str, float]:
        """DescribeClientQuotas: the quotas of exactly the user entity `user` (not its
        defaults, nor its (user, client-id) pairs)."""
        from kafka.protocol.admin import DescribeClientQuotasRequest as Describe

        request = Describe(
            components=[Describe.ComponentData(entity_type="user", match_type=0, match=user)],
            strict=True,
        )
        response = await asyncio.to_thread(
            self._kafka_python_call, f"describe the quotas of {user}", _sender(request)
        )
        if response.error_code:
            raise KafkaAdminError(
                f"describe the quotas of {user}: {response.error_message or response.error_code}",
                code=response.error_code,
            )
        return {v.key: v.value for entry in response.entries or () for v in entry.values}

    async def alter_quotas(self, user: str, changes: Mapping[str, float | None]) -> None:
        """AlterClientQuotas of the user entity `user`: each key set, or removed where None."""
        if not changes:
            return
        from kafka.protocol.admin import AlterClientQuotasRequest as Alter

        entry = Alter.EntryData(
            entity=[Alter.EntryData.EntityData(entity_type="user", entity_name=user)],
            ops=[
                Alter.EntryData.OpData(key=key, value=value or 0.0, remove=value is None)
                for key, value in sorted(changes.items())
            ],
        )
        request = Alter(entries=[entry], validate_only=False)
        response = await asyncio.to_thread(
            self._kafka_python_call, f"alter the quotas of {user}", _sender(request)
        )
        for result in response.entries:
            if result.error_code:
                # Invalid values are the spec's fault: trying again will not help.
                raise KafkaAdminError(
                    f"alter the quotas of {user}: {result.error_message or result.error_code}",
                    retriable=False,
                    code=result.error_code,
                )

    def close(self) -> None:
        with self._kafka_python_lock:
            if self._kafka_python_client is not None:
                self._kafka_python_client.close()
                self._kafka_python_client = None


def _sender(request: Any) -> Any:
    """A call of `_kafka_python_call` that sends one request to any broker. KafkaAdminClient
    has no method for the client quota APIs, so this uses its connection manager, as its own
    methods do."""
    return lambda c: c._manager.run(c._manager.send, request)


def _ssl_context(tls: ClientTls) -> ssl.SSLContext:
    """kafka-python's TLS: the CA from memory; the key pair through a private temporary file
    (the ssl module loads keys from files only), removed at once."""
    ctx = ssl.create_default_context(cadata=tls.ca)
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        os.chmod(f.name, 0o600)
        f.write(tls.key.rstrip("\n") + "\n" + tls.cert)
    try:
        ctx.load_cert_chain(f.name)
    finally:
        os.unlink(f.name)
    return ctx
