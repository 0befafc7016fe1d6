"""A SparkApplication run by the Kubeflow spark-operator, built from the Go module proxy and
installed by its own Helm chart, as a user runs the shipped manifest
``ad-clicks-sparkapplication.yaml``: the spark-operator's controller runs spark-submit, Spark
creates the driver pod, the driver its executor pod, and the node agent runs them all as local
processes. The job counts clicks per campaign and window from a topic of a cluster that the
samsa operator runs, found by its KafkaCluster, and checkpoints on the claim of
``checkpoints-pvc.yaml``. The chart is installed without its admission webhook: the shipped
manifests need none."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from day2_support import NAME, in_thread, start_cluster
from kube_support import REPO
from test_spark_submit import in_namespace

sys.path.insert(0, str(REPO / "tests" / "e2e"))
from spark_k8s import network_policies

from samsa.local_cluster import ZooKeeperServer
from samsa_dev.kube.build import spark_operator_chart
from samsa_dev.kube.harness import KubeNamespace, eventually
from samsa_spark.generator import Click, closed_window_counts, generate, publish

# The spark-operator, then its spark-submit, the driver and an executor beside an operator-run
# cluster on a 2-core machine: over three minutes, so this runs in `make e2e`, not `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.e2e]

MANIFESTS = REPO / "spark-on-k8s" / "manifests"
SPARKAPPLICATIONS = "/apis/sparkoperator.k8s.io/v1beta2/namespaces/{}/sparkapplications/{}"
SOURCE, SINK = "ad-clicks", "ad-click-counts"


def application(namespace: str) -> dict[str, Any]:
    """The shipped manifest as a user applies it here: this namespace, this cluster's name, and
    one executor of 512 MB on a 2-core machine."""
    [app] = yaml.safe_load_all((MANIFESTS / "ad-clicks-sparkapplication.yaml").read_text())
    app["metadata"]["namespace"] = namespace
    spec = app["spec"]
    args = spec["arguments"]
    args[args.index("--kafka-cluster") + 1] = NAME
    spec["sparkConf"]["spark.sql.shuffle.partitions"] = "2"
    spec["driver"]["memory"] = spec["executor"]["memory"] = "512m"
    spec["executor"]["instances"] = 1
    return dict(app)


def owners(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(o["kind"], o["name"]) for o in obj["metadata"].get("ownerReferences") or []}


def fill(bootstrap: str, clicks: list[Click]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic, partitions in ((SOURCE, 3), (SINK, 1)):
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    publish(bootstrap, SOURCE, clicks)


def counted(bootstrap: str) -> list[dict[str, Any]]:
    """What the job has committed to its sink so far."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(SINK, 0), timeout=10)
        c.assign([TopicPartition(SINK, 0, 0)])
        out: list[dict[str, Any]] = []
        while high and len(out) < high:
            batch = c.consume(1000, 1.0)
            if not batch:
                break  # the rest is transaction markers, or not committed yet
            out += [json.loads(m.value()) for m in batch if not m.error()]
        return out
    finally:
        c.close()


async def test_the_spark_operator_runs_the_shipped_ad_clicks_application(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    one_broker = {
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        # The sink's commit log takes the brokers' default.
        "default.replication.factor": "1",
    }
    _status, brokers = await start_cluster(kube, zookeeper, brokers=1, **one_broker)
    _imps, clicks = generate(600, seed=5, span_minutes=60)
    await in_thread(fill, brokers.bootstrap_servers, clicks)

    # The spark-operator's chart, as its README installs it, watching this namespace.
    release = f"spark-operator-{kube.name}"
    await kube.helm(
        "install",
        release,
        str(spark_operator_chart()),
        "--set",
        "webhook.enable=false",
        "--set",
        f"spark.jobNamespaces={{{kube.name}}}",
    )
    await kube.kubectl("apply", "-f", "-", stdin=network_policies(kube.name, release, kube.name))
    for shipped in ("rbac.yaml", "checkpoints-pvc.yaml"):
        text = in_namespace((MANIFESTS / shipped).read_text(), kube.name)
        await kube.kubectl("apply", "-f", "-", stdin=text)
    app = application(kube.name)
    await kube.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(app))
    path = SPARKAPPLICATIONS.format(kube.name, app["metadata"]["name"])

    async def state() -> str | None:
        status = ((await kube.api.get(path)) or {}).get("status") or {}
        now = (status.get("applicationState") or {}).get("state")
        if now in ("FAILED", "SUBMISSION_FAILED"):
            pytest.fail(f"the SparkApplication {now}: {status}")
        return now if now == "RUNNING" else None

    await eventually(state, within=240, what="the SparkApplication RUNNING")

    expected = closed_window_counts(clicks)

    async def results() -> dict[tuple[str, str], int] | None:
        out = await in_thread(counted, brokers.bootstrap_servers)
        got = {(r["campaign_id"], r["window_start"]): r["clicks"] for r in out}
        assert len(got) == len(out), "a window was appended twice"
        return got if len(got) >= len(expected) else None

    got = await eventually(results, within=240, what="every closed window counted")
    assert got == expected
    assert len(expected) > 20

    pods = f"/api/v1/namespaces/{kube.name}/pods"
    driver = await kube.api.get(f"{pods}/{app['metadata']['name']}-driver")
    assert driver is not None and driver["status"]["phase"] == "Running"
    executors = (await kube.get("pods", "-l", "spark-role=executor"))["items"]
    assert len(executors) == 1
    # Owned by the application (the spark-operator's pod templates say so), and the executors
    # by their driver too (Spark's own): deleting either takes them away.
    owner = ("SparkApplication", app["metadata"]["name"])
    assert owners(driver) == {owner}
    assert owners(executors[0]) == {owner, ("Pod", driver["metadata"]["name"])}
    # The checkpoint is on the claim, as the pod templates mount it (the spark-operator would
    # drop the application's own `volumes` without its webhook).
    claim = await kube.api.get(
        f"/api/v1/namespaces/{kube.name}/persistentvolumeclaims/samsa-spark-checkpoints"
    )
    assert claim is not None and claim["status"]["phase"] == "Bound"
    volume = await kube.api.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
    assert volume is not None
    checkpoint = Path(volume["spec"]["hostPath"]["path"]) / "ad-clicks"
    assert (checkpoint / "offsets").is_dir() and (checkpoint / "commits").is_dir()

    # Deleting the application stops it: the spark-operator deletes its driver, and the
    # executors go with their owner.
    await kube.kubectl("delete", "sparkapplication", app["metadata"]["name"], "--wait=false")

    async def gone() -> bool:
        return not (await kube.get("pods", "-l", "spark-role"))["items"]

    await eventually(gone, within=120, what="the application's pods deleted")
