"""Spark on kind (tests/e2e/spark_k8s.py, the scenario code the real nodes run too): the
shipped spark-submit Job in cluster mode, a driver and 2 executors, against a KafkaCluster of
the operator's. Skipped, with the reason, where kind cannot run (e2e_support)."""

from __future__ import annotations

import spark_k8s
from e2e_support import kind_signal, kubectl, run

from samsa_dev import images


def kill(pod: str, container: str) -> None:
    kind_signal("spark-submit", pod, container, "-KILL")


def target() -> spark_k8s.SparkTarget:
    return spark_k8s.SparkTarget(kubectl, "spark-submit", kill)


def test_spark_submit_in_cluster_mode_on_kind(kind_cluster: str) -> None:
    # `make images` builds it (buildah); kind loads its OCI archive, which keeps the ref.
    (archive,) = images.archives(["spark"]).values()
    run("kind", "load", "image-archive", str(archive), "--name", kind_cluster, timeout=600)
    kubectl("create", "namespace", "spark-submit")
    spark_k8s.Spark(target()).spark_submit()
