"""kopf handlers of KafkaUser, thin like `handlers`: the user's Secret (its credentials), its
SCRAM credential set in the cluster (AlterUserScramCredentials), its ACLs reconciled to the
declared set (CreateAcls, DeleteAcls), its client quotas to the declared ones
(AlterClientQuotas), and its status. The decisions are in `users`.

Deleting a KafkaUser (a kopf finalizer) removes its SCRAM credential, its ACLs and its
quotas from the cluster, then its Secret. A TLS user's certificate cannot be taken back:
losing its ACLs is what revokes it. When the cluster is already gone there is nothing to
remove, and the finalizer lets go.
"""

from __future__ import annotations

import datetime
from typing import Any

import kopf

from samsa_operator import models, pausing, resources, security, status, users
from samsa_operator.handlers import (
    GROUP,
    SETTINGS,
    VERSION,
    Log,
    admin_for,
    cluster_for,
    reachable,
    reconciled,
    refuse,
    state,
    write_status,
)
from samsa_operator.k8s import KubeError, Obj
from samsa_operator.kafka import KafkaAdminError


def user_secret(body: Any, data: dict[str, str]) -> Obj:
    """The Secret named after the user, owned by it (garbage-collected with it)."""
    meta = body["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {
                "app.kubernetes.io/name": "samsa",
                "app.kubernetes.io/instance": body["spec"]["clusterRef"],
                "app.kubernetes.io/component": "kafka-user",
                "app.kubernetes.io/managed-by": resources.MANAGED_BY,
                "kafka.samsa.dev/user": meta["name"],
            },
            "ownerReferences": [
                {
                    "apiVersion": models.API_VERSION,
                    "kind": "KafkaUser",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "type": "Opaque",
        "data": security.encode(data),
    }


async def secret_data(name: str, namespace: str) -> dict[str, str]:
    found = await state().kube.get("v1", "Secret", namespace, name)
    return security.decode((found or {}).get("data"))


async def clients_ca_of(cluster: resources.Cluster) -> security.KeyPair | None:
    """The clients CA's key pair: the user's own, from its Secret, or the one the operator
    made; None while there is none."""
    own = cluster.spec.certificates.clients_ca
    if own is None:
        ca = await secret_data(security.clients_ca_secret(cluster.name), cluster.namespace)
        key, cert = ca.get("ca.key"), ca.get("ca.crt")
    else:
        ca = await secret_data(own.secret_name, cluster.namespace)
        key, cert = ca.get(own.key), ca.get(own.certificate)
    return security.KeyPair(key, cert) if key and cert else None


async def reconcile_user(body: kopf.Body, logger: Log) -> None:
    meta = body["metadata"]
    name, namespace, uid = meta["name"], meta["namespace"], meta["uid"]
    generation = meta.get("generation")
    if meta.get("deletionTimestamp"):
        return

    async def not_ready(reason: str, message: str) -> None:
        logger.warning(f"{reason}: {message}")
        await refuse("KafkaUser", namespace, name, generation, reason, message)

    async with state().lock(uid):
        try:
            spec = models.parse_spec(models.KafkaUserSpec, dict(body.get("spec") or {}))
        except models.SpecError as exc:
            await not_ready("InvalidSpec", str(exc))
            return
        found = await cluster_for(namespace, spec.cluster_ref)
        if found is None:
            await not_ready(
                "ClusterNotFound", f"spec.clusterRef: no KafkaCluster {spec.cluster_ref} here"
            )
            return
        cluster_body, cluster = found
        if not cluster.spec.secured:
            await not_ready(
                "ClusterNotSecured",
                f"KafkaCluster {spec.cluster_ref} has no TLS or authenticated listener",
            )
            return
        kind = spec.authentication.type
        if not any(c.authentication == kind for c in cluster.spec.listeners.clients):
            await not_ready(
                "NoListener",
                f"KafkaCluster {spec.cluster_ref} has no listener with authentication {kind}",
            )
            return
        principal = users.principal(name, spec)
        try:
            existing = await secret_data(name, namespace)
            if kind == "scram-sha-512":
                data = users.scram_secret(name, existing)
            else:
                clients_ca = await clients_ca_of(cluster)
                if clients_ca is None:
                    await not_ready("ClusterNotReady", "the clients CA is not issued yet")
                    return
                certificates = cluster.spec.certificates
                data = users.tls_secret(
                    name,
                    existing,
                    clients_ca,
                    datetime.datetime.now(datetime.UTC),
                    certificates.validity_days,
                    certificates.renewal_days,
                )
            # The Secret first: credentials in the cluster are never ones nobody holds.
            await state().kube.apply(user_secret(body, data))
        except KubeError as exc:
            await not_ready("KubernetesError", str(exc))
            raise kopf.TemporaryError(str(exc), delay=SETTINGS.resync_seconds) from None
        if not reachable(cluster_body):
            await not_ready(
                "ClusterNotReady", f"KafkaCluster {spec.cluster_ref} has no ready broker yet"
            )
            return
        fingerprint = users.credentials_fingerprint(data)
        applied = (body.get("status") or {}).get("credentials")
        old_quotas = (body.get("status") or {}).get("quotas") or {}
        try:
            admin = await admin_for(cluster_body, cluster)
            if kind == "scram-sha-512" and (
                applied != fingerprint or not await admin.has_scram_credential(name)
            ):
                await admin.set_scram_credential(name, data["password"], users.SCRAM_ITERATIONS)
                logger.info(f"SCRAM-SHA-512 credential of {name} set")
            desired = users.desired_acls(spec, principal)
            plan = users.plan_acls(desired, await admin.acls_of(principal))
            await admin.create_acls(plan.create)
            await admin.delete_acls(plan.delete)
            if plan.create or plan.delete:
                added, removed = len(plan.create), len(plan.delete)
                logger.info(f"ACLs of {principal}: {added} added, {removed} removed")
            entity, quotas = users.quota_entity(principal), users.desired_quotas(spec)
            changes = users.plan_quotas(quotas, await admin.quotas_of(entity))
            await admin.alter_quotas(entity, changes)
            if changes:
                logger.info(f"quotas of {entity}: {changes}")
        except KafkaAdminError as exc:
            await not_ready("KafkaError", str(exc))
            if exc.retriable:
                raise kopf.TemporaryError(str(exc), delay=SETTINGS.resync_seconds) from None
            return
        await write_status(
            "KafkaUser",
            namespace,
            name,
            {
                "observedGeneration": generation,
                "username": principal,
                "secret": name,
                "credentials": fingerprint,
                "acls": len(desired),
                # A merge patch keeps keys it does not name: a removed quota is named as null.
                "quotas": {**dict.fromkeys(old_quotas), **quotas},
            },
            [
                status.condition(
                    "Ready", True, "Ready", f"{principal}, {len(desired)} ACLs", generation
                )
            ],
        )


reconciled("kafkausers", "user", reconcile_user)


@kopf.on.delete(GROUP, VERSION, "kafkausers", retries=5, backoff=2)
async def user_deleted(body: kopf.Body, logger: Log, **_: Any) -> None:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = dict(body.get("spec") or {})
    if pausing.paused(body):
        logger.info(f"paused: the credentials and ACLs of {name} are left in the cluster")
        return
    found = await cluster_for(namespace, str(spec.get("clusterRef", "")))
    if found is not None:
        cluster_body, cluster = found
        kind = (spec.get("authentication") or {}).get("type", "scram-sha-512")
        principal = security.user_principal(name, kind)
        try:
            admin = await admin_for(cluster_body, cluster)
            if kind == "scram-sha-512" and await admin.delete_scram_credential(name):
                logger.info(f"SCRAM-SHA-512 credential of {name} deleted")
            acls = sorted(await admin.acls_of(principal))
            await admin.delete_acls(acls)
            logger.info(f"{len(acls)} ACLs of {principal} deleted")
            entity = users.quota_entity(principal)
            await admin.alter_quotas(entity, users.plan_quotas({}, await admin.quotas_of(entity)))
        except KafkaAdminError as exc:
            raise kopf.TemporaryError(str(exc), delay=2) from None
    else:
        logger.info(f"cluster {spec.get('clusterRef')} is gone; releasing user {name}")
    try:
        await state().kube.delete("v1", "Secret", namespace, name)
    except KubeError as exc:
        raise kopf.TemporaryError(str(exc), delay=2) from None
