"""On kind: helm install the operator, apply a KafkaCluster and a Topic, wait for Ready, then
produce and consume through the bootstrap Service from a pod inside the cluster."""

from __future__ import annotations

import json

from e2e_support import in_cluster, kubectl

CLUSTER = """
apiVersion: kafka.samsa.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: e2e
spec:
  brokers:
    replicas: 3
    storage: {size: 1Gi, deleteClaim: true}
  zookeeper:
    replicas: 1
    storage: {size: 1Gi, deleteClaim: true}
  config:
    offsets.topic.replication.factor: 3
"""

TOPIC = """
apiVersion: kafka.samsa.dev/v1alpha1
kind: Topic
metadata:
  name: greetings
spec:
  clusterRef: e2e
  partitions: 3
  replicationFactor: 3
"""


def test_cluster_topic_produce_consume(kind_cluster: str) -> None:
    kubectl("apply", "-f", "-", stdin=CLUSTER)
    kubectl("wait", "--for=condition=Ready", "kc/e2e", "--timeout=600s", timeout=660)
    status = json.loads(kubectl("get", "kc", "e2e", "-o", "json"))["status"]
    bootstrap = status["bootstrapServers"]["internal"]
    assert bootstrap == "e2e-kafka-bootstrap.default.svc:9092"
    assert [b["ready"] for b in status["brokers"]] == [True, True, True]

    kubectl("apply", "-f", "-", stdin=TOPIC)
    kubectl("wait", "--for=condition=Ready", "kt/greetings", "--timeout=120s", timeout=180)

    records = "".join(f"k{i}:hello {i}\n" for i in range(20))
    in_cluster(
        "produce", "produce", "greetings", "-b", bootstrap, "--key-separator", ":", stdin=records
    )
    out = in_cluster(
        "consume",
        "consume",
        "greetings",
        "-b",
        bootstrap,
        "--from-beginning",
        "--count",
        "20",
        "--format",
        "%k:%s\n",
    )
    assert sorted(line for line in out.splitlines() if line.startswith("k")) == sorted(
        records.splitlines()
    )

    # A broker pod killed comes back and the cluster is Ready again.
    kubectl("delete", "pod", "e2e-kafka-1", "--wait=false")
    kubectl("wait", "--for=condition=Ready", "pod/e2e-kafka-1", "--timeout=300s", timeout=360)
    kubectl("wait", "--for=condition=Ready", "kc/e2e", "--timeout=300s", timeout=360)

    kubectl("delete", "kt", "greetings", "--timeout=120s")
    kubectl("delete", "kc", "e2e", "--timeout=300s")
