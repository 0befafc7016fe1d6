"""Day-2 operations of a KafkaCluster, one step at a time from a kopf timer: observe the pods,
the StatefulSets and the brokers; apply live-changeable configs and verify what each broker
runs; let `day2_planner.next_step` decide; persist its progress in the status; then act.

A handler module, thin like `handlers`: the decisions are in `day2_planner`, `rolling` and
`rebalance`, the I/O in `k8s`, `kafka` and `zookeeper`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from samsa_operator import (
    day2_planner,
    diagnosis,
    models,
    pausing,
    reconcile,
    resources,
    rolling,
    status,
    zookeeper,
)
from samsa_operator.day2_planner import ClusterView, KafkaView, PodView
from samsa_operator.handlers import (
    GROUP,
    SETTINGS,
    VERSION,
    Log,
    admin_for,
    current_cluster,
    paused_now,
    state,
    write_status,
)
from samsa_operator.k8s import KubeError, Obj
from samsa_operator.kafka import ClusterAdmin, KafkaAdminError

# Where the operator reaches the ZooKeeper servers when it runs outside Kubernetes: host:port
# of each server, by ordinal, comma-separated.
ZOOKEEPER_ANNOTATION = "kafka.samsa.dev/zookeeper-servers"
REVISION_LABEL = "controller-revision-hash"


async def operate(body: kopf.Body, logger: Log, **_: Any) -> None:
    meta = body["metadata"]
    if meta.get("deletionTimestamp") or pausing.paused(body):
        return  # paused: the step in progress ended; the next waits for the resume
    try:
        spec = models.parse_spec(models.KafkaClusterSpec, dict(body.get("spec") or {}))
    except models.SpecError:
        return  # the Ready condition says why; nothing runs on an invalid spec
    async with state().lock(meta["uid"]):
        if await paused_now("KafkaCluster", meta["namespace"], meta["name"]):
            return
        try:
            await _step(spec, meta["namespace"], meta["name"], logger)
        except KubeError as exc:
            logger.warning(f"day-2 step: Kubernetes: {exc}")
        except KafkaAdminError as exc:
            logger.warning(f"day-2 step: Kafka: {exc}")


async def _step(spec: models.KafkaClusterSpec, namespace: str, name: str, logger: Log) -> None:
    kube = state().kube
    body = await kube.get(models.API_VERSION, "KafkaCluster", namespace, name)
    if body is None:
        return
    cluster = await current_cluster(body, spec)
    if cluster.current_brokers is None:
        return  # the children come first
    selector = cluster.selector("kafka")
    pods = _by_ordinal(await kube.list("v1", "Pod", namespace, selector))
    await _spread_manual_roll(body, pods, logger)
    admin = await admin_for(body, cluster)
    reasons = await _verify_configs(admin, cluster, pods, logger)
    # A fresh look for the decision: asking brokers takes time, and meanwhile a pod may have
    # stopped being ready.
    sts = await kube.get("apps/v1", "StatefulSet", namespace, cluster.broker_sts)
    pods = _by_ordinal(await kube.list("v1", "Pod", namespace, selector))
    try:
        kafka = await admin.observe()
    except KafkaAdminError as exc:
        # Brokers restarting, a controller moving: look again at the next step, and leave the
        # conditions as they were meanwhile.
        logger.debug(f"cluster not observable: {exc}")
        return
    current = body.get("status") or {}
    zk_sts, zk_pods, zk_modes = await _zookeeper(body, cluster)
    view = ClusterView(
        wanted_brokers=spec.brokers.replicas,
        sts_replicas=cluster.current_brokers,
        pods={i: _pod_view(i, p, sts) for i, p in pods.items()},
        kafka=kafka,
        restart_reasons=reasons,
        scaling=current.get("scaling"),
        roll=current.get("roll"),
        leader_imbalance_percent=spec.operations.leader_imbalance_percentage,
        zookeeper_pods={i: _pod_view(i, p, zk_sts) for i, p in zk_pods.items()},
        zookeeper_replicas=int((zk_sts or {}).get("spec", {}).get("replicas") or 0),
        zookeeper_modes=zk_modes,
    )
    step = day2_planner.next_step(view, status.now())
    fields = dict(step.status)
    throttle = await _throttle(admin, spec, kafka, step.action, current, logger)
    if throttle is not None:
        if throttle.get("brokers") and current.get("throttle") != throttle:
            # Recorded before it is set, so a throttle is never left behind unrecorded.
            await write_status("KafkaCluster", namespace, name, {"throttle": throttle})
            await _set_throttle(admin, throttle, logger)
        fields["throttle"] = throttle or None
    generation = body["metadata"].get("generation")
    conditions = [
        status.condition(c.type, c.ok, c.reason, c.message, generation) for c in step.conditions
    ]
    # The status first: an operator that dies after acting knows what it did.
    await write_status("KafkaCluster", namespace, name, fields, conditions)
    if step.action is not None:
        await _act(step.action, cluster, admin, logger)


def _by_ordinal(pods: list[Obj]) -> dict[int, Obj]:
    out = {}
    for pod in pods:
        suffix = pod["metadata"]["name"].rpartition("-")[2]
        if suffix.isdigit():
            out[int(suffix)] = pod
    return out


def _pod_view(ordinal: int, pod: Obj, sts: Obj | None) -> PodView:
    meta = pod.get("metadata", {})
    revision = (meta.get("labels") or {}).get(REVISION_LABEL)
    wanted = ((sts or {}).get("status") or {}).get("updateRevision")
    annotations = meta.get("annotations") or {}
    return PodView(
        ordinal,
        ready=diagnosis.pod_ready(pod),
        terminating=bool(meta.get("deletionTimestamp")),
        outdated=bool(revision and wanted and revision != wanted),
        manual_restart=annotations.get(resources.MANUAL_ROLL_ANNOTATION) == "true",
    )


async def _spread_manual_roll(body: Obj, pods: dict[int, Obj], logger: Log) -> None:
    """The KafkaCluster's manual-roll annotation becomes one on each broker pod (where a roll
    keeps track of it: a restarted pod comes back without), then goes."""
    annotations = body["metadata"].get("annotations") or {}
    if annotations.get(resources.MANUAL_ROLL_ANNOTATION) != "true":
        return
    kube = state().kube
    mark = {"metadata": {"annotations": {resources.MANUAL_ROLL_ANNOTATION: "true"}}}
    for pod in pods.values():
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp"):
            await kube.patch("v1", "Pod", meta["namespace"], meta["name"], mark)
    unmark = {"metadata": {"annotations": {resources.MANUAL_ROLL_ANNOTATION: None}}}
    meta = body["metadata"]
    await kube.patch(models.API_VERSION, "KafkaCluster", meta["namespace"], meta["name"], unmark)
    logger.info("manual rolling update of every broker requested")


async def _verify_configs(
    admin: ClusterAdmin, cluster: resources.Cluster, pods: dict[int, Obj], logger: Log
) -> dict[int, list[str]]:
    """For each ready broker not yet known to run its current properties: set what can
    change live, stamp the pod once nothing differs. Returns the keys that need a restart,
    by broker id. The brokers are asked at once: one that hangs delays none of the others."""
    wanted = resources.broker_config_hashes(cluster)
    running = {
        i: (p["metadata"].get("annotations") or {}).get(resources.CONFIG_HASH_ANNOTATION)
        for i, p in pods.items()
    }
    unverified = [
        i
        for i in reconcile.brokers_to_restart(wanted, running)
        if i in pods
        and diagnosis.pod_ready(pods[i])
        and not pods[i]["metadata"].get("deletionTimestamp")
    ]
    found = await asyncio.gather(
        *(_verify(admin, cluster, pods[i], i, wanted[i], logger) for i in unverified)
    )
    return {i: keys for i, keys in zip(unverified, found, strict=True) if keys}


async def _verify(
    admin: ClusterAdmin,
    cluster: resources.Cluster,
    pod: Obj,
    broker_id: int,
    wanted_hash: str,
    logger: Log,
) -> list[str]:
    try:
        reported = await admin.broker_config(broker_id)
        diff = rolling.config_diff(resources.broker_properties(cluster, broker_id), reported)
        if diff.set or diff.delete:
            await admin.alter_broker_config(broker_id, diff.set, diff.delete)
            changed = ", ".join([*diff.set, *diff.delete])
            logger.info(f"broker {broker_id}: {changed} changed live, without a restart")
    except KafkaAdminError as exc:
        logger.debug(f"broker {broker_id}: configs unknown: {exc}")
        return []
    if diff.empty:
        meta = pod["metadata"]
        stamp = {"metadata": {"annotations": {resources.CONFIG_HASH_ANNOTATION: wanted_hash}}}
        await state().kube.patch("v1", "Pod", meta["namespace"], meta["name"], stamp)
    return list(diff.restart)


async def _throttle(
    admin: ClusterAdmin,
    spec: models.KafkaClusterSpec,
    kafka: KafkaView,
    action: day2_planner.Action | None,
    current: Obj,
    logger: Log,
) -> Obj | None:
    """The replication throttle wanted while partitions move ({} once lifted); None: no
    change. Lifting happens here; setting, by the caller once it is recorded."""
    rate = spec.operations.reassignment_throttle_bytes_per_second
    moving = bool(kafka.reassigning) or isinstance(action, day2_planner.Reassign)
    recorded = current.get("throttle")
    if moving and rate > 0:
        keep = [b.id for b in kafka.brokers if b.id < spec.brokers.replicas]
        wanted = {"rate": rate, "brokers": keep}
        return None if recorded == wanted else wanted
    if recorded and not kafka.reassigning:
        registered = {b.id for b in kafka.brokers}
        for b in recorded.get("brokers", []):
            if b in registered:
                await admin.alter_broker_config(b, {}, [rolling.THROTTLE_KEY])
        logger.info("replication throttle lifted")
        return {}
    return None


async def _set_throttle(admin: ClusterAdmin, throttle: Obj, logger: Log) -> None:
    rate = str(throttle["rate"])
    for b in throttle["brokers"]:
        await admin.alter_broker_config(b, {rolling.THROTTLE_KEY: rate})
    logger.info(f"replication into brokers {throttle['brokers']} throttled to {rate} B/s")


async def _zookeeper(
    body: Obj, cluster: resources.Cluster
) -> tuple[Obj | None, dict[int, Obj], dict[int, str | None]]:
    """The ZooKeeper StatefulSet, its pods and each server's mode (leader, follower)."""
    if not cluster.deploys_zookeeper:
        return None, {}, {}
    kube = state().kube
    sts = await kube.get("apps/v1", "StatefulSet", cluster.namespace, cluster.zk_sts)
    pods = _by_ordinal(
        await kube.list("v1", "Pod", cluster.namespace, cluster.selector("zookeeper"))
    )
    override = (body["metadata"].get("annotations") or {}).get(ZOOKEEPER_ANNOTATION)
    addresses = override.split(",") if override else []
    modes: dict[int, str | None] = {}
    for i in pods:
        if i < len(addresses):
            host, port = zookeeper.parse_address(addresses[i], resources.ZK_CLIENT_PORT)
        else:
            host = f"{cluster.zk_sts}-{i}.{cluster.zk_headless}.{cluster.namespace}.svc"
            port = resources.ZK_CLIENT_PORT
        modes[i] = await zookeeper.server_mode(host, port)
    return sts, pods, modes


async def _act(
    action: day2_planner.Action, cluster: resources.Cluster, admin: ClusterAdmin, logger: Log
) -> None:
    kube = state().kube
    ns = cluster.namespace
    if isinstance(action, day2_planner.Restart):
        pod = cluster.broker_pod(action.broker_id)
        logger.info(f"restarting broker {action.broker_id}: {'; '.join(action.reasons)}")
        await kube.delete("v1", "Pod", ns, pod)
    elif isinstance(action, day2_planner.RestartZooKeeper):
        logger.info(f"restarting ZooKeeper server {action.ordinal}")
        await kube.delete("v1", "Pod", ns, f"{cluster.zk_sts}-{action.ordinal}")
    elif isinstance(action, day2_planner.Reassign):
        logger.info(f"reassigning {len(action.plan)} partitions: {action.why}")
        await admin.reassign(action.plan)
    elif isinstance(action, day2_planner.Resize):
        logger.info(f"broker StatefulSet resized to {action.replicas}")
        patch = {"spec": {"replicas": action.replicas}}
        await kube.patch("apps/v1", "StatefulSet", ns, cluster.broker_sts, patch)
    elif isinstance(action, day2_planner.ElectPreferred):
        failed = await admin.elect_preferred(action.partitions)
        logger.info(f"preferred leaders elected for {len(action.partitions)} partitions")
        if failed:
            logger.warning(f"preferred leaders not elected: {failed}")


kopf.timer(
    GROUP,
    VERSION,
    "kafkaclusters",
    interval=SETTINGS.operation_seconds,
    idle=0,
    id="cluster_operations",
)(operate)
