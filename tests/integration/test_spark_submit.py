"""spark-submit in cluster mode against the real control plane, as a user runs a Spark job on
Kubernetes: Spark's client creates the driver pod, the driver creates its executor pods, and
the node agent runs both as local processes (the Spark image's entrypoint mapped to the local
PySpark). The job, the lag report, reads through the samsa format a topic of a cluster that the
operator runs, and finds the cluster from its KafkaCluster's status."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from day2_support import NAME, in_thread, start_cluster
from kube_support import REPO

from samsa.local_cluster import ZooKeeperServer
from samsa_dev.kube.harness import KubeNamespace

# Three JVMs (spark-submit, the driver, an executor) beside an operator-run cluster on a
# 2-core machine: about three minutes, so this runs in `make e2e`, not `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.e2e]

MANIFESTS = REPO / "spark-on-k8s" / "manifests"
SPARK_HOME = Path(pyspark.__file__).parent
TOPIC = "clicks"
PARTITIONS = 3
PER_PARTITION = 400
GROUP, COMMITTED = "billing", 150


def fill(bootstrap: str) -> None:
    """The topic, its records, and a consumer group that committed part of partition 0."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            p.produce(TOPIC, b"v" * 10, f"k{i}".encode(), partition=part)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED)], asynchronous=False)
    finally:
        c.close()


def failure(stderr: str) -> str:
    """spark-submit's error, without the stack frames under it."""
    lines = [line for line in stderr.splitlines() if not line.lstrip().startswith("at ")]
    return "\n".join(lines[-40:])


def in_namespace(text: str, namespace: str) -> str:
    """rbac.yaml as a user applies it to another namespace than `samsa`."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
        for s in d.get("subjects") or []:
            s["namespace"] = namespace
    return yaml.safe_dump_all(docs)


async def test_spark_submit_runs_the_lag_report_on_kubernetes_against_the_operators_cluster(
    kube: KubeNamespace, zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    one_broker = {"min.insync.replicas": "1", "offsets.topic.replication.factor": "1"}
    _status, brokers = await start_cluster(kube, zookeeper, brokers=1, **one_broker)
    await in_thread(fill, brokers.bootstrap_servers)
    await kube.kubectl(
        "apply", "-f", "-", stdin=in_namespace((MANIFESTS / "rbac.yaml").read_text(), kube.name)
    )
    token = (await kube.kubectl("create", "token", "samsa-spark", "--duration=1h")).strip()
    template = MANIFESTS / "pod-templates" / "restricted.yaml"
    output = tmp_path / "report"
    submit = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        f"k8s://{kube.api.server}",
        "--deploy-mode",
        "cluster",
        "--name",
        "lag-report",
        *(
            word
            for key, value in {
                "spark.kubernetes.namespace": kube.name,
                "spark.kubernetes.container.image": "samsa-spark:0.1.0",
                "spark.kubernetes.authenticate.driver.serviceAccountName": "samsa-spark",
                "spark.kubernetes.authenticate.submission.caCertFile": kube.api.ca,
                "spark.kubernetes.authenticate.submission.oauthToken": token,
                "spark.kubernetes.driver.podTemplateFile": str(template),
                "spark.kubernetes.executor.podTemplateFile": str(template),
                # Kept after the job, to be looked at; Spark deletes them by default.
                "spark.kubernetes.executor.deleteOnTermination": "false",
                "spark.executor.instances": "1",
                "spark.executor.memory": "512m",
                "spark.driver.memory": "512m",
                "spark.sql.shuffle.partitions": "2",
            }.items()
            for word in ("--conf", f"{key}={value}")
        ),
        "local:///opt/samsa/jobs/lag_report.py",
        # In the driver's own namespace: no --namespace.
        "--kafka-cluster",
        NAME,
        "--topics",
        TOPIC,
        "--output",
        str(output),
    ]
    # The submitter is a user's machine: its own credentials, no kubeconfig.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["PYSPARK_PYTHON"] = sys.executable
    done = await asyncio.to_thread(
        subprocess.run, submit, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, failure(done.stderr)

    [driver] = (await kube.get("pods", "-l", "spark-role=driver"))["items"]
    assert driver["status"]["phase"] == "Succeeded"
    app = driver["metadata"]["labels"]["spark-app-selector"]
    executors = (await kube.get("pods", "-l", f"spark-role=executor,spark-app-selector={app}"))[
        "items"
    ]
    assert executors, "the driver created no executor pod"
    for ex in executors:
        [owner] = ex["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("Pod", driver["metadata"]["name"])

    rows = [
        json.loads(line)
        for part in sorted(output.glob("part-*.json"))
        for line in part.read_text().splitlines()
    ]
    by_partition = {r["partition"]: r for r in rows}
    assert sorted(by_partition) == list(range(PARTITIONS)), rows
    for r in rows:
        assert r["topic"] == TOPIC
        assert r["records"] == r["log_end"] == PER_PARTITION
    assert by_partition[0]["group"] == GROUP
    assert by_partition[0]["lag"] == PER_PARTITION - COMMITTED
