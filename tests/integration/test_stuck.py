"""A stuck KafkaCluster says why, on the real control plane: for each cause that Kubernetes
reports before any container runs (a claim that cannot bind, a pod that cannot be scheduled,
a pod that Pod Security refuses), the Ready condition names it within 30 s, and `kubectl get
kc` shows its reason. The node agent runs only the operator's pod here; the causes that need
a kubelet (an image that cannot be pulled, a crash loop) are in the e2e suite."""

from __future__ import annotations

import json
import time

from kube_support import CHART, OPERATOR_ENV, condition

from samsa_dev.kube.harness import KubeNamespace, eventually

# The promise: the cause is in the status within 30 s of `kubectl apply`.
WITHIN = 30.0


async def stuck(kube: KubeNamespace, name: str, spec: dict[str, object]) -> dict[str, str]:
    """Apply a KafkaCluster once the operator runs; its Ready condition once it names a
    cause (a reason other than the two counts), within WITHIN seconds of the apply."""
    kube.run_only_the_operator()
    await kube.install_operator(CHART, **OPERATOR_ENV)
    await kube.kubectl("rollout", "status", f"deployment/{kube.release}", "--timeout=120s")
    body = {"apiVersion": "kafka.samsa.dev/v1alpha1", "kind": "KafkaCluster"}
    body |= {"metadata": {"name": name}, "spec": spec}
    applied = time.monotonic()
    await kube.kubectl("apply", "-f", "-", stdin=json.dumps(body))

    async def named() -> dict[str, str] | None:
        ready = condition(await kube.maybe_get("kc", name))
        counted = ("ZooKeeperNotReady", "BrokersNotReady", None)
        return ready if ready.get("reason") not in counted else None

    ready = await eventually(named, within=WITHIN, what=f"{name}'s Ready condition to name a cause")
    assert time.monotonic() - applied < WITHIN
    assert ready["status"] == "False"
    listing = await kube.kubectl("get", "kc", name)
    assert ready["reason"] in listing.splitlines()[1].split(), listing
    return ready


async def test_a_claim_with_no_storage_class_is_named(kube: KubeNamespace) -> None:
    none = {"storage": {"storageClass": ""}}
    ready = await stuck(kube, "nostorage", {"zookeeper": none, "brokers": none})
    assert ready["reason"] == "ClaimPending"
    assert ready["message"].startswith("0/3 ZooKeeper servers ready: PersistentVolumeClaim data-")
    assert "no storage class is set" in ready["message"]


async def test_an_unschedulable_pod_is_named_with_the_schedulers_reason(
    kube: KubeNamespace,
) -> None:
    greedy = {"resources": {"requests": {"cpu": "500"}}}
    ready = await stuck(kube, "greedy", {"zookeeper": greedy})
    assert ready["reason"] == "Unschedulable"
    assert "pod greedy-zookeeper-0: 0/3 nodes are available" in ready["message"]
    assert "Insufficient cpu" in ready["message"]


async def test_a_pod_security_refusal_is_named(kube: KubeNamespace) -> None:
    # The namespace enforces the restricted level; a pod that runs as root is refused.
    root = {"securityContext": {"runAsUser": 0, "runAsNonRoot": False}}
    ready = await stuck(kube, "rooted", {"podTemplate": root})
    assert ready["reason"] == "PodSecurityRefused"
    assert 'violates PodSecurity "restricted' in ready["message"]
    assert "StatefulSet rooted-zookeeper" in ready["message"]
