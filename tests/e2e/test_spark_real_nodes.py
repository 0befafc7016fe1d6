"""Spark on the real nodes (tests/e2e/spark_k8s.py): spark-submit in cluster mode, its driver
and 2 executors as pods of the Spark image; and a SparkApplication through the real
spark-operator, its controller and webhook in containers of the image built here, its
driver killed and submitted again, on from its checkpoint on a PersistentVolumeClaim with
every window once."""

from __future__ import annotations

import pytest
import spark_k8s
from realnodes_support import (
    NODES,
    OPERATOR_IMAGE,
    ZOOKEEPER_IMAGE,
    Cluster,
    helm,
    install_operator,
    signal_container,
)

from samsa_dev.kube import node_images
from samsa_dev.kube.build import spark_operator_chart
from samsa_dev.kube.realnodes import RealNodes

pytestmark = pytest.mark.e2e

SPARK_IMAGES = ["spark", "spark-operator"]


@pytest.fixture(scope="module")
def spark_nodes(real_cluster: Cluster) -> Cluster:
    """The real nodes with the Spark images too."""
    archives = node_images.archives()
    if OPERATOR_IMAGE not in archives or ZOOKEEPER_IMAGE not in archives:
        pytest.skip(f"{OPERATOR_IMAGE} or {ZOOKEEPER_IMAGE} is not built: run `make images`")
    RealNodes(real_cluster.plane, NODES).load_images(SPARK_IMAGES)
    return real_cluster


def spark_in(cluster: Cluster, ns: str) -> spark_k8s.Spark:
    """A restricted namespace that the samsa operator watches."""
    cluster.namespace(ns)
    install_operator(cluster, ns)

    def kill(pod: str, container: str) -> None:
        signal_container(cluster, ns, pod, container, "kill")

    return spark_k8s.Spark(spark_k8s.SparkTarget(cluster.kubectl, ns, kill))


@pytest.mark.timeout(1200)
def test_spark_submit_in_cluster_mode_runs_a_driver_and_two_executors(
    spark_nodes: Cluster,
) -> None:
    spark_in(spark_nodes, "spark-submit").spark_submit()


@pytest.mark.timeout(1500)
def test_a_spark_application_killed_goes_on_from_its_checkpoint_exactly_once(
    spark_nodes: Cluster,
) -> None:
    ns, release = "spark-app", "spark-operator"
    spark = spark_in(spark_nodes, ns)
    helm(
        spark_nodes,
        "-n",
        release,
        "install",
        release,
        str(spark_operator_chart()),
        "--create-namespace",
        "--set",
        f"spark.jobNamespaces={{{ns}}}",
        "--wait",
        "--timeout=300s",
    )
    spark_nodes.kubectl("apply", "-f", "-", stdin=spark_k8s.network_policies(ns, release, release))
    spark.spark_application(release)
