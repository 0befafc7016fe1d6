"""kopf handlers, kept thin: read, decide (`reconcile`, `resources`, `status`), apply, report.

A KafkaCluster is reconciled on every spec change and again by a timer, which reverts a
user's edits of the children; its day-2 operations (rolls, scaling, leader elections) run in
`day2_driver`. A Topic is reconciled through the Kafka admin protocol, a replication-factor change
as a tracked reassignment; its deletion finalizer lets go when the cluster is already gone,
so it cannot wedge a namespace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from samsa_operator import (
    diagnosis,
    metrics,
    models,
    pausing,
    reconcile,
    resources,
    security,
    status,
    volumes,
)
from samsa_operator.k8s import Kube, KubeError, load_config
from samsa_operator.kafka import ClusterAdmin, KafkaAdminError
from samsa_operator.reconcile import ClusterInfo

GROUP, VERSION = models.GROUP, models.VERSION
Log = logging.Logger | logging.LoggerAdapter[Any]
# Where a KafkaCluster's brokers are reached when the operator runs outside Kubernetes.
BOOTSTRAP_ANNOTATION = "kafka.samsa.dev/bootstrap-servers"
# On a KafkaCluster: renew the brokers' certificates now (then a roll); removed once done.
FORCE_RENEW_ANNOTATION = "kafka.samsa.dev/force-renew"
FINALIZER = "kafka.samsa.dev/finalizer"

# Children of one cluster the operator may delete when the spec no longer wants them.
_PRUNABLE = (
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("policy/v1", "PodDisruptionBudget"),
)


@dataclass(frozen=True)
class OperatorSettings:
    broker_image: str = resources.DEFAULT_BROKER_IMAGE
    resync_seconds: float = 30.0
    kafka_timeout: float = 10.0
    operation_seconds: float = 5.0  # how often day-2 operations take their next step
    # How often a KafkaCluster that is not Ready is reconciled, when that is sooner than the
    # resync: its status then names why within seconds, and Ready follows its pods closely.
    stuck_seconds: float = 5.0
    network_policies: bool = False  # a NetworkPolicy per cluster limits the brokers' ports

    @classmethod
    def from_env(cls) -> OperatorSettings:
        env = os.environ
        return cls(
            broker_image=env.get("SAMSA_OPERATOR_BROKER_IMAGE") or resources.DEFAULT_BROKER_IMAGE,
            resync_seconds=float(env.get("SAMSA_OPERATOR_RESYNC_SECONDS") or 30),
            kafka_timeout=float(env.get("SAMSA_OPERATOR_KAFKA_TIMEOUT") or 10),
            operation_seconds=float(env.get("SAMSA_OPERATOR_OPERATION_SECONDS") or 5),
            stuck_seconds=float(env.get("SAMSA_OPERATOR_STUCK_SECONDS") or 5),
            network_policies=env.get("SAMSA_OPERATOR_NETWORK_POLICIES", "").lower() == "true",
        )


SETTINGS = OperatorSettings.from_env()


@dataclass
class State:
    kube: Kube
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    admins: dict[tuple[str, str], ClusterAdmin] = field(default_factory=dict)

    def lock(self, uid: str) -> asyncio.Lock:
        return self.locks.setdefault(uid, asyncio.Lock())

    def admin(self, bootstrap_servers: str, tls: security.ClientTls | None = None) -> ClusterAdmin:
        """One admin connection per cluster address (and certificate), kept across
        reconciles."""
        key = (bootstrap_servers, tls.fingerprint if tls else "")
        if key not in self.admins:
            for old in [k for k in self.admins if k[0] == bootstrap_servers]:
                self.admins.pop(old).close()  # a renewed certificate replaces the old client
            self.admins[key] = ClusterAdmin(bootstrap_servers, SETTINGS.kafka_timeout, tls)
        return self.admins[key]


_state: State | None = None


def state() -> State:
    assert _state is not None, "the operator has not started"
    return _state


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _state
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    # A resync in flight when its resource is deleted holds the finalizer until it ends;
    # look again every second, not kopf's default minute.
    settings.background.cancellation_polling = 1
    load_config()
    _state = State(Kube())


# -- KafkaCluster -----------------------------------------------------------------------------


async def write_status(
    kind: str,
    namespace: str,
    name: str,
    fields: dict[str, Any],
    conditions: list[dict[str, Any]] | None = None,
) -> None:
    kube = state().kube
    current = await kube.get(models.API_VERSION, kind, namespace, name)
    if current is None:
        return
    old = (current.get("status") or {}).get("conditions", [])
    body = {**fields, "conditions": status.merge_conditions(old, conditions or [], status.now())}
    await kube.patch(models.API_VERSION, kind, namespace, name, {"status": body}, sub="status")


async def refuse(
    kind: str, namespace: str, name: str, generation: int | None, reason: str, message: str
) -> None:
    await write_status(
        kind,
        namespace,
        name,
        {"observedGeneration": generation},
        [status.condition("Ready", False, reason, message, generation)],
    )


Reconcile = Callable[[kopf.Body, Log], Awaitable[None]]


async def held(body: kopf.Body, logger: Log) -> bool:
    """Whether the pause switch (`pausing`) holds the resource back; its status says so, and
    stops saying so once the switch is off."""
    meta = body["metadata"]
    kind, namespace, name = body["kind"], meta["namespace"], meta["name"]
    conditions = (body.get("status") or {}).get("conditions") or []
    if pausing.paused(body):
        generation = meta.get("generation")
        shown = [c for c in conditions if c.get("type") == pausing.PAUSED]
        if not shown or shown[0].get("observedGeneration") != generation:
            # Under the resource's lock: once the condition shows, no reconcile or day-2 step
            # that began before the pause is still at work.
            async with state().lock(meta["uid"]):
                logger.info("reconciliation paused")
                condition = pausing.paused_condition(generation)
                await write_status(kind, namespace, name, {}, [condition])
        return True
    if pausing.was_paused(conditions):
        logger.info("reconciliation resumed")
        resumed = {"status": {"conditions": pausing.without_paused(conditions)}}
        await state().kube.patch(models.API_VERSION, kind, namespace, name, resumed, sub="status")
    return False


async def paused_now(kind: str, namespace: str, name: str) -> bool:
    """The pause switch as the resource is now, for work that held its lock: a timer's body
    can be older than the annotation."""
    now = await state().kube.get(models.API_VERSION, kind, namespace, name)
    return now is not None and pausing.paused(now)


def reconciled(plural: str, kind: str, reconcile_fn: Reconcile) -> None:
    """Reconcile on create, update and resume, and again every resync (reverting drift),
    unless paused."""

    async def handler(body: kopf.Body, logger: Log, **_: Any) -> None:
        if not await held(body, logger):
            await metrics.measured(body["kind"], lambda: reconcile_fn(body, logger))

    for on in (kopf.on.resume, kopf.on.create, kopf.on.update):
        on(GROUP, VERSION, plural, id=f"{kind}_changed")(handler)
    interval = SETTINGS.resync_seconds
    kopf.timer(GROUP, VERSION, plural, interval=interval, idle=0, id=f"{kind}_resync")(handler)


async def reconcile_cluster(body: kopf.Body, logger: Log) -> None:
    meta = body["metadata"]
    name, namespace, uid = meta["name"], meta["namespace"], meta["uid"]
    generation = meta.get("generation")
    async with state().lock(uid):
        if await paused_now("KafkaCluster", namespace, name):
            return
        try:
            spec = models.parse_spec(models.KafkaClusterSpec, dict(body.get("spec") or {}))
        except models.SpecError as exc:
            # Nothing running is touched: the children keep the last valid spec.
            logger.warning(f"invalid spec: {exc}")
            await refuse("KafkaCluster", namespace, name, generation, "InvalidSpec", str(exc))
            return
        kube = state().kube
        try:
            cluster = await current_cluster(body, spec)
            await record_growth(cluster, body, logger)
            secrets: list[dict[str, Any]] = []
            force_renew = await force_renew_asked(body)
            ends: dict[str, float] = {}
            if spec.secured:
                pki = await plan_pki(cluster, renew=force_renew)
                cluster = dataclasses.replace(cluster, pki_rotation=pki.rotation)
                secrets = resources.pki_secrets(cluster, pki)
                ends = pki.ends()
            metrics.certificates_end(namespace, name, ends)
        except KubeError as exc:
            await refuse("KafkaCluster", namespace, name, generation, "KubernetesError", str(exc))
            raise kopf.TemporaryError(str(exc), delay=SETTINGS.resync_seconds) from None
        except security.PkiError as exc:
            # Nothing running is touched; looked at again at the next resync, as a Secret
            # it waits for may be made at any time.
            logger.warning(f"certificate: {exc}")
            await refuse(
                "KafkaCluster", namespace, name, generation, "InvalidCertificate", str(exc)
            )
            raise kopf.TemporaryError(str(exc), delay=SETTINGS.resync_seconds) from None
        # The Secrets first: the brokers' pods mount them.
        wanted = secrets + resources.children(cluster)
        try:
            for child in wanted:
                outcome = await kube.apply(child)
                if outcome != "unchanged":
                    logger.info(f"{child['kind']} {child['metadata']['name']} {outcome}")
            await prune(cluster, wanted, logger)
            if force_renew:
                # Only once the renewed certificates are stored: a crash before renews again.
                unmark = {"metadata": {"annotations": {FORCE_RENEW_ANNOTATION: None}}}
                await kube.patch(models.API_VERSION, "KafkaCluster", namespace, name, unmark)
                logger.info("the brokers' certificates renewed on request")
            pods = await kube.list("v1", "Pod", namespace, cluster.selector("kafka"))
            if spec.rack is not None:
                await label_racks(pods, spec.rack.topology_key, logger)
                pods = await kube.list("v1", "Pod", namespace, cluster.selector("kafka"))
            zk_sts = None
            if cluster.deploys_zookeeper:
                zk_sts = await kube.get("apps/v1", "StatefulSet", namespace, cluster.zk_sts)
            zk_cause, broker_cause = await diagnose(cluster, pods, zk_sts)
        except KubeError as exc:
            await refuse("KafkaCluster", namespace, name, generation, "KubernetesError", str(exc))
            raise kopf.TemporaryError(str(exc), delay=SETTINGS.resync_seconds) from None
        try:
            storage = await grow_volumes(cluster, logger)
        except KubeError as exc:
            await refuse("KafkaCluster", namespace, name, generation, "KubernetesError", str(exc))
            raise kopf.TemporaryError(str(exc), delay=SETTINGS.resync_seconds) from None
        info = await describe(body, cluster, pods)
        fields, conditions = status.cluster_status(
            cluster,
            generation=generation,
            broker_pods=pods,
            zookeeper_sts=zk_sts,
            info=info,
            zookeeper_cause=zk_cause,
            broker_cause=broker_cause,
        )
        fields["storage"] = {part: [c.to_status() for c in p.claims] for part, p in storage}
        ok, reason, message = volumes.merged_condition([p for _, p in storage])
        conditions.append(status.condition("StorageResized", ok, reason, message, generation))
        await write_status("KafkaCluster", namespace, name, fields, conditions)


async def grow_volumes(
    cluster: resources.Cluster, logger: Log
) -> list[tuple[str, volumes.VolumePlan]]:
    """The brokers' and ZooKeeper's claims grown to their ``storage.size`` (`volumes`)."""
    kube = state().kube
    spec, ns = cluster.spec, cluster.namespace
    parts = [("brokers", cluster.broker_sts, spec.brokers.replicas, spec.brokers.storage.size)]
    if cluster.deploys_zookeeper:
        zk = spec.zookeeper
        parts.append(("zookeeper", cluster.zk_sts, zk.replicas, zk.storage.size))
    expandable: dict[str, bool] = {}
    out = []
    for part, sts, replicas, size in parts:
        claims = []
        for claim_name in volumes.claim_names("data", sts, replicas):
            claim = await kube.get("v1", "PersistentVolumeClaim", ns, claim_name)
            if claim is None:
                continue
            claims.append(claim)
            klass = (claim.get("spec") or {}).get("storageClassName") or ""
            if klass and klass not in expandable:
                found = await kube.get("storage.k8s.io/v1", "StorageClass", None, klass)
                expandable[klass] = bool((found or {}).get("allowVolumeExpansion"))
        planned = volumes.plan(size, claims, expandable)
        for claim_name, grown in planned.patches.items():
            patch = {"spec": {"resources": {"requests": {"storage": grown}}}}
            await kube.patch("v1", "PersistentVolumeClaim", ns, claim_name, patch)
            logger.info(f"claim {claim_name} growing to {grown}")
        out.append((part, planned))
    return out


def is_ready(body: Any) -> bool:
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


if SETTINGS.stuck_seconds < SETTINGS.resync_seconds:

    @kopf.timer(
        GROUP,
        VERSION,
        "kafkaclusters",
        interval=SETTINGS.stuck_seconds,
        idle=0,
        id="KafkaCluster_stuck",
        when=lambda body, **_: not is_ready(body),
    )
    async def reconcile_stuck_cluster(body: kopf.Body, logger: Log, **_: Any) -> None:
        if not await held(body, logger):
            await metrics.measured(body["kind"], lambda: reconcile_cluster(body, logger))


async def diagnose(
    cluster: resources.Cluster, broker_pods: list[dict[str, Any]], zk_sts: dict[str, Any] | None
) -> tuple[diagnosis.Cause | None, diagnosis.Cause | None]:
    """Why ZooKeeper's and the brokers' pods are not Ready, each part looked at only when it
    is not: its StatefulSet's, pods' and claims' state and events (`diagnosis`)."""
    kube = state().kube
    ns = cluster.namespace
    now = datetime.datetime.now(datetime.UTC)
    zk_cause = None
    if zk_sts is not None and status.ready_replicas(zk_sts) < cluster.spec.zookeeper.replicas:
        zk_pods = await kube.list("v1", "Pod", ns, cluster.selector("zookeeper"))
        zk_cause = diagnosis.diagnose(await workload(ns, zk_sts, zk_pods), now)
    broker_cause = None
    if sum(diagnosis.pod_ready(p) for p in broker_pods) < cluster.spec.brokers.replicas:
        sts = await kube.get("apps/v1", "StatefulSet", ns, cluster.broker_sts)
        if sts is not None:
            broker_cause = diagnosis.diagnose(await workload(ns, sts, broker_pods), now)
    return zk_cause, broker_cause


async def workload(
    namespace: str, sts: dict[str, Any], pods: list[dict[str, Any]]
) -> diagnosis.Workload:
    """What `diagnosis` reads of one StatefulSet: its events, and the claims of its pods that
    are not Ready with theirs."""
    kube = state().kube
    events = await kube.events(namespace, "StatefulSet", sts["metadata"]["name"])
    claims = {}
    for pod in pods:
        if diagnosis.pod_ready(pod):
            continue
        for name in diagnosis.claims_of(pod):
            claim = await kube.get("v1", "PersistentVolumeClaim", namespace, name)
            if claim is None:
                continue
            claims[name] = claim
            if (claim.get("status") or {}).get("phase") == "Pending":
                events += await kube.events(namespace, "PersistentVolumeClaim", name)
    return diagnosis.Workload(sts, pods, claims, events)


async def force_renew_asked(body: Any) -> bool:
    """The force-renew annotation, confirmed on the KafkaCluster as it is now: a reconcile
    queued with an older body must not renew (and roll) a second time."""
    meta = body["metadata"]
    if (meta.get("annotations") or {}).get(FORCE_RENEW_ANNOTATION) != "true":
        return False
    now = await state().kube.get(
        models.API_VERSION, "KafkaCluster", meta["namespace"], meta["name"]
    )
    annotations = ((now or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(FORCE_RENEW_ANNOTATION) == "true"


async def plan_pki(cluster: resources.Cluster, renew: bool = False) -> security.Pki:
    """The cluster's PKI from its Secrets: kept, completed or renewed (`security.plan_pki`)."""
    existing = {}
    own = security.own_secret_names(cluster.spec)
    for secret in [*security.secret_names(cluster.name), *own]:
        found = await state().kube.get("v1", "Secret", cluster.namespace, secret)
        if found is not None:
            existing[secret] = security.decode(found.get("data"))
    now = datetime.datetime.now(datetime.UTC)
    return security.plan_pki(cluster, existing, now, renew, await rolled_out(cluster))


async def rolled_out(cluster: resources.Cluster) -> bool:
    """Every broker runs, ready, with the certificates its StatefulSet's template names:
    the step of a CA key change that waits for a roll may go on."""
    kube = state().kube
    sts = await kube.get("apps/v1", "StatefulSet", cluster.namespace, cluster.broker_sts)
    template = ((sts or {}).get("spec") or {}).get("template") or {}
    wanted = (
        (template.get("metadata") or {})
        .get("annotations", {})
        .get(resources.CERTIFICATES_ANNOTATION)
    )
    pods = await kube.list("v1", "Pod", cluster.namespace, cluster.selector("kafka"))
    return (
        sts is not None
        and len(pods) >= cluster.broker_count
        and all(
            (p["metadata"].get("annotations") or {}).get(resources.CERTIFICATES_ANNOTATION)
            == wanted
            and diagnosis.pod_ready(p)
            for p in pods
        )
    )


async def current_cluster(body: Any, spec: models.KafkaClusterSpec) -> resources.Cluster:
    """The builders' view of a KafkaCluster, with its broker StatefulSet's current size."""
    meta = body["metadata"]
    cluster = resources.Cluster(
        meta["name"],
        meta["namespace"],
        meta["uid"],
        spec,
        broker_image=spec.brokers.image or SETTINGS.broker_image,
        network_policy=SETTINGS.network_policies,
    )
    sts = await state().kube.get("apps/v1", "StatefulSet", cluster.namespace, cluster.broker_sts)
    if sts is None:
        return cluster
    current = int(sts.get("spec", {}).get("replicas") or 0)
    return dataclasses.replace(cluster, current_brokers=current)


async def record_growth(cluster: resources.Cluster, body: Any, logger: Log) -> None:
    """Before the StatefulSet grows, remember in the status that the brokers it adds are
    owed a rebalance (`day2_driver` does it), so an operator restart cannot forget it."""
    current, wanted = cluster.current_brokers, cluster.spec.brokers.replicas
    if current is None or wanted <= current:
        return
    scaling = (body.get("status") or {}).get("scaling") or {}
    if scaling.get("toReplicas") == wanted:
        return
    record = {
        "phase": "Growing",
        "fromReplicas": current,
        "toReplicas": wanted,
        "startedAt": status.now(),
        "message": f"adding brokers {', '.join(str(i) for i in range(current, wanted))}",
    }
    meta = body["metadata"]
    await write_status("KafkaCluster", meta["namespace"], meta["name"], {"scaling": record})
    logger.info(f"scaling up from {current} to {wanted} brokers")


async def prune(cluster: resources.Cluster, wanted: list[dict[str, Any]], logger: Any) -> None:
    """Delete this cluster's children that the spec no longer asks for."""
    kube = state().kube
    keep = {resources.key(o) for o in wanted}
    labels = {
        "app.kubernetes.io/instance": cluster.name,
        "app.kubernetes.io/managed-by": resources.MANAGED_BY,
    }
    prunable = list(_PRUNABLE)
    if cluster.network_policy:
        prunable.append(("networking.k8s.io/v1", "NetworkPolicy"))
    for api_version, kind in prunable:
        for obj in await kube.list(api_version, kind, cluster.namespace, labels):
            owners = obj["metadata"].get("ownerReferences", [])
            if not any(o.get("uid") == cluster.uid for o in owners):
                continue
            if (api_version, kind, obj["metadata"]["name"]) not in keep:
                await kube.delete(api_version, kind, cluster.namespace, obj["metadata"]["name"])
                logger.info(f"{kind} {obj['metadata']['name']} deleted: no longer in the spec")


async def label_racks(pods: list[dict[str, Any]], topology_key: str, logger: Any) -> None:
    """Record each scheduled broker pod's rack (its node's label) in the pod's annotations.

    The pod's init container waits for it and writes broker.rack before the broker starts.
    """
    kube = state().kube
    for pod in pods:
        meta = pod["metadata"]
        node_name = pod.get("spec", {}).get("nodeName")
        if not node_name or resources.RACK_ANNOTATION in (meta.get("annotations") or {}):
            continue
        node = await kube.get("v1", "Node", None, node_name)
        rack = ((node or {}).get("metadata", {}).get("labels") or {}).get(topology_key)
        if rack is None:
            logger.warning(f"node {node_name} of {meta['name']} has no label {topology_key}")
            continue
        patch = {"metadata": {"annotations": {resources.RACK_ANNOTATION: rack}}}
        await kube.patch("v1", "Pod", meta["namespace"], meta["name"], patch)
        logger.info(f"pod {meta['name']} is in rack {rack}")


def reachable(cluster_body: Any) -> bool:
    """Worth asking over Kafka: some broker is ready, or the user says where they are."""
    annotations = cluster_body.get("metadata", {}).get("annotations") or {}
    ready_brokers = (cluster_body.get("status") or {}).get("readyBrokers") or 0
    return BOOTSTRAP_ANNOTATION in annotations or ready_brokers > 0


def bootstrap_of(cluster_body: Any, cluster: resources.Cluster) -> str:
    annotations = cluster_body.get("metadata", {}).get("annotations") or {}
    default = (
        security.operator_bootstrap(cluster) if cluster.spec.secured else cluster.bootstrap_servers
    )
    return str(annotations.get(BOOTSTRAP_ANNOTATION) or default)


async def admin_for(cluster_body: Any, cluster: resources.Cluster) -> ClusterAdmin:
    """The admin connection to a cluster: plain, or mutual TLS with the operator's own
    certificate (a super user) on the replication listener of a secured cluster."""
    bootstrap = bootstrap_of(cluster_body, cluster)
    if not cluster.spec.secured:
        return state().admin(bootstrap)
    name = security.operator_certs_secret(cluster.name)
    try:
        found = await state().kube.get("v1", "Secret", cluster.namespace, name)
    except KubeError as exc:
        raise KafkaAdminError(f"Secret {name}: {exc}") from None
    tls = security.operator_tls(security.decode((found or {}).get("data")))
    if tls is None:
        raise KafkaAdminError(f"the operator's certificate is not issued yet (Secret {name})")
    return state().admin(bootstrap, tls)


async def describe(
    body: Any, cluster: resources.Cluster, pods: list[dict[str, Any]]
) -> ClusterInfo | None:
    """The controller and cluster id, when some broker is up to ask."""
    override = BOOTSTRAP_ANNOTATION in (body.get("metadata", {}).get("annotations") or {})
    if not override and not any(diagnosis.pod_ready(p) for p in pods):
        return None
    try:
        return await (await admin_for(body, cluster)).cluster_info()
    except KafkaAdminError:
        return None


# -- Topic ------------------------------------------------------------------------------------


async def cluster_for(namespace: str, cluster_ref: str) -> tuple[Any, resources.Cluster] | None:
    found = await state().kube.get(models.API_VERSION, "KafkaCluster", namespace, cluster_ref)
    if found is None or found["metadata"].get("deletionTimestamp"):
        return None
    try:
        spec = models.parse_spec(models.KafkaClusterSpec, found.get("spec"))
    except models.SpecError:
        spec = models.KafkaClusterSpec()
    meta = found["metadata"]
    return found, resources.Cluster(meta["name"], namespace, meta.get("uid", ""), spec)


async def reconcile_topic(body: kopf.Body, logger: Log) -> None:
    meta = body["metadata"]
    name, namespace, uid = meta["name"], meta["namespace"], meta["uid"]
    generation = meta.get("generation")

    async def not_ready(reason: str, message: str) -> None:
        logger.warning(f"{reason}: {message}")
        await refuse("Topic", namespace, name, generation, reason, message)

    async with state().lock(uid):
        try:
            spec = models.parse_spec(models.TopicSpec, dict(body.get("spec") or {}))
        except models.SpecError as exc:
            await not_ready("InvalidSpec", str(exc))
            return
        topic_name = spec.topic_name or name
        applied_name = (body.get("status") or {}).get("topicName")
        if applied_name and applied_name != topic_name:
            await not_ready(
                "TopicNameImmutable",
                f"spec.topicName cannot change from {applied_name} to {topic_name}",
            )
            return
        found = await cluster_for(namespace, spec.cluster_ref)
        if found is None:
            await not_ready(
                "ClusterNotFound", f"spec.clusterRef: no KafkaCluster {spec.cluster_ref} here"
            )
            return
        cluster_body, cluster = found
        if not reachable(cluster_body):
            await not_ready(
                "ClusterNotReady", f"KafkaCluster {spec.cluster_ref} has no ready broker yet"
            )
            return
        desired = reconcile.DesiredTopic(
            name=topic_name,
            partitions=spec.partitions,
            replication_factor=spec.replication_factor,
            config={k: resources.render_value(v) for k, v in spec.config.items()},
        )
        reassigning = (body.get("status") or {}).get("reassignment")
        try:
            admin = await admin_for(cluster_body, cluster)
            info = await admin.cluster_info()
            # Never onto brokers a scale-down is draining.
            brokers = [b for b in info.brokers if b.id < cluster.spec.brokers.replicas]
            moving = sorted(p for t, p in await admin.reassignments() if t == topic_name)
            if moving:
                # Ours (a replication-factor change) shows its progress; a scaling's does not.
                if reassigning:
                    await reassignment_status(body, spec, len(moving), logger)
                return
            current = await admin.describe_topic(topic_name)
            load = await admin.cluster_load()
            plan = reconcile.plan_topic(desired, current, brokers, load)
            if plan.refusal is not None:
                await not_ready(plan.refusal.reason, plan.refusal.message)
                return
            if plan.create is not None:
                await admin.create_topic(topic_name, plan.create, plan.config_set)
                logger.info(f"topic {topic_name} created: {plan.create}")
            else:
                if plan.add_partitions:
                    await admin.create_partitions(topic_name, spec.partitions, plan.add_partitions)
                    logger.info(f"topic {topic_name} grown: {plan.add_partitions}")
                if plan.config_set or plan.config_delete:
                    await admin.alter_topic_config(topic_name, plan.config_set, plan.config_delete)
                    logger.info(f"topic {topic_name} configs changed")
                if plan.reassign:
                    await reassignment_status(body, spec, len(plan.reassign), logger)
                    await admin.reassign({(topic_name, p): r for p, r in plan.reassign.items()})
                    logger.info(f"topic {topic_name} reassigned: {plan.reassign}")
                    return
            applied = await admin.describe_topic(topic_name)
            if reassigning and applied is not None:
                failed = await admin.elect_preferred([(topic_name, p) for p in applied.assignment])
                if failed:
                    logger.warning(f"preferred leaders not elected: {failed}")
        except KafkaAdminError as exc:
            await not_ready("KafkaError", str(exc))
            if exc.retriable:
                raise kopf.TemporaryError(str(exc), delay=SETTINGS.resync_seconds) from None
            return
        if applied is None:
            raise kopf.TemporaryError(f"topic {topic_name} not visible yet", delay=1)
        await write_status(
            "Topic",
            namespace,
            name,
            {
                "observedGeneration": generation,
                "topicName": topic_name,
                "topicId": applied.topic_id,
                "partitions": applied.partitions,
                "replicationFactor": applied.replication_factor,
                "reassignment": None,
            },
            [
                status.condition(
                    "Ready",
                    True,
                    "Ready",
                    f"{applied.partitions} partitions, replication factor "
                    f"{applied.replication_factor}",
                    generation,
                )
            ],
        )


async def reassignment_status(
    body: Any, spec: models.TopicSpec, remaining: int, logger: Log
) -> None:
    """Ready=False while a replication-factor change moves partitions, with its progress."""
    meta = body["metadata"]
    rf = spec.replication_factor
    before = (body.get("status") or {}).get("reassignment") or {}
    message = f"replication factor changing to {rf}: {remaining} partitions moving"
    logger.info(message)
    await write_status(
        "Topic",
        meta["namespace"],
        meta["name"],
        {
            "observedGeneration": meta.get("generation"),
            "reassignment": {
                "replicationFactor": rf,
                "remaining": remaining,
                "startedAt": before.get("startedAt") or status.now(),
            },
        },
        [status.condition("Ready", False, "Reassigning", message, meta.get("generation"))],
    )


reconciled("kafkaclusters", "cluster", reconcile_cluster)
reconciled("topics", "topic", reconcile_topic)


# optional: no finalizer of its own holds the cluster; its children go by owner references.
@kopf.on.delete(GROUP, VERSION, "kafkaclusters", optional=True)
async def cluster_deleted(body: kopf.Body, **_: Any) -> None:
    meta = body["metadata"]
    metrics.certificates_end(meta["namespace"], meta["name"], {})


@kopf.on.delete(GROUP, VERSION, "topics", retries=3, backoff=2)
async def topic_deleted(body: kopf.Body, logger: Log, **_: Any) -> None:
    meta = body["metadata"]
    spec = dict(body.get("spec") or {})
    topic_name = (body.get("status") or {}).get("topicName") or spec.get("topicName")
    topic_name = topic_name or meta["name"]
    if pausing.paused(body):
        logger.info(f"paused: topic {topic_name} is left in the cluster")
        return
    found = await cluster_for(meta["namespace"], str(spec.get("clusterRef", "")))
    if found is None:
        # The cluster (and its topics) is gone or going: nothing to delete, never wedge.
        logger.info(f"cluster {spec.get('clusterRef')} is gone; releasing topic {topic_name}")
        return
    cluster_body, cluster = found
    try:
        admin = await admin_for(cluster_body, cluster)
        deleted = await admin.delete_topic(topic_name)
    except KafkaAdminError as exc:
        raise kopf.TemporaryError(str(exc), delay=2) from None
    logger.info(f"topic {topic_name} {'deleted' if deleted else 'was already gone'}")
