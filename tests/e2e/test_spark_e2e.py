"""On kind: build the Spark image, run job (a) with plain spark-submit against a KafkaCluster
made by the operator, and check it wrote its windows. Needs Docker, kind, kubectl and helm;
skipped with a message where they are missing.

SAMSA_E2E_CLUSTER names an existing kind cluster to use (and keep); otherwise one is created
and deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SPARK = ROOT / "spark-on-k8s"
NS = "samsa"
IMAGE = "samsa-spark:0.1.0"


def _docker_works() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


if not _docker_works():
    pytest.skip("kind e2e: no Docker engine here", allow_module_level=True)
for tool in ("kind", "kubectl", "helm"):
    if shutil.which(tool) is None:
        pytest.skip(f"kind e2e: {tool} is not installed", allow_module_level=True)


def run(*cmd: str, input: str | None = None, timeout: float = 600) -> str:
    out = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def kubectl(*args: str, **kw) -> str:
    return run("kubectl", "--context", f"kind-{CLUSTER}", *args, **kw)


CLUSTER = os.environ.get("SAMSA_E2E_CLUSTER", "samsa-spark-e2e")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    existing = run("kind", "get", "clusters").split()
    created = CLUSTER not in existing
    if created:
        run("kind", "create", "cluster", "--name", CLUSTER, "--wait", "120s", timeout=900)
    try:
        yield CLUSTER
    finally:
        if created:
            run("kind", "delete", "cluster", "--name", CLUSTER, timeout=300)


@pytest.fixture(scope="module")
def kafka_cluster(cluster: str) -> str:
    """The operator (helm chart) and a KafkaCluster named samsa from the examples; returns its
    status.bootstrapServers."""
    run("make", "-C", str(ROOT), "images", timeout=1800)
    for image in run("docker", "images", "--format", "{{.Repository}}:{{.Tag}}").split():
        if image.startswith(("samsa", "samsa-operator")):
            run("kind", "load", "docker-image", image, "--name", cluster, timeout=600)
    kubectl(
        "apply",
        "-f",
        "-",
        input=kubectl("create", "namespace", NS, "--dry-run=client", "-o", "yaml"),
    )
    run(
        "helm",
        "--kube-context",
        f"kind-{cluster}",
        "upgrade",
        "--install",
        "samsa-operator",
        str(ROOT / "helm" / "samsa-operator"),
        "--namespace",
        NS,
        "--wait",
        timeout=900,
    )
    examples = [
        d
        for f in sorted((ROOT / "examples").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d and d.get("kind") == "KafkaCluster"
    ]
    assert examples, "examples/ has no KafkaCluster to run against"
    kc = examples[0]
    kc["metadata"].update({"name": "samsa", "namespace": NS})
    kubectl("apply", "-f", "-", input=yaml.safe_dump(kc))
    kubectl(
        "wait",
        "-n",
        NS,
        "--for=condition=Ready",
        "kafkacluster/samsa",
        "--timeout=900s",
        timeout=960,
    )
    return kubectl(
        "get", "-n", NS, "kafkacluster/samsa", "-o", "jsonpath={.status.bootstrapServers}"
    )


def _pod_python(name: str, code: str, timeout: float = 600) -> str:
    """Run Python in a throw-away pod of the Spark image; returns its output."""
    kubectl(
        "run",
        name,
        "-n",
        NS,
        f"--image={IMAGE}",
        "--image-pull-policy=IfNotPresent",
        "--restart=Never",
        "--command",
        "--",
        "python3",
        "-c",
        code,
    )
    kubectl(
        "wait",
        "-n",
        NS,
        f"pod/{name}",
        "--for=jsonpath={.status.phase}=Succeeded",
        f"--timeout={int(timeout)}s",
        timeout=timeout + 30,
    )
    logs = kubectl("logs", "-n", NS, f"pod/{name}")
    kubectl("delete", "-n", NS, f"pod/{name}", "--wait=false")
    return logs


def test_job_a_runs_with_spark_submit_on_kind(cluster: str, kafka_cluster: str) -> None:
    from samsa_dev import images

    # `make images` builds it (buildah); kind loads its OCI archive, which keeps the ref.
    (archive,) = images.archives(["spark"]).values()
    run("kind", "load", "image-archive", str(archive), "--name", cluster, timeout=600)
    for f in ("rbac.yaml", "checkpoints-pvc.yaml"):
        kubectl("apply", "-f", str(SPARK / "manifests" / f))
    _pod_python(
        "samsa-gen",
        "from samsa_spark.demo import prepare_ad_clicks; "
        f"prepare_ad_clicks({kafka_cluster!r}, 3000, source='ad-clicks', sink='ad-click-counts')",
    )
    # The manifest runs the job for ever; here it stops once the input is processed.
    (job,) = yaml.safe_load_all((SPARK / "manifests" / "ad-clicks-spark-submit.yaml").read_text())
    job["spec"]["template"]["spec"]["containers"][0]["command"].append("--available-now")
    kubectl("delete", "-n", NS, "job/samsa-ad-clicks-submit", "--ignore-not-found")
    kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
    deadline = time.monotonic() + 900
    while True:
        phase = kubectl(
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            "spark-role=driver,spark-app-name=samsa-ad-clicks",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ).split()
        if "Succeeded" in phase:
            break
        assert "Failed" not in phase, kubectl(
            "logs", "-n", NS, "-l", "spark-role=driver", "--tail=200"
        )
        assert time.monotonic() < deadline, "job (a)'s driver did not finish"
        time.sleep(5)
    out = _pod_python(
        "samsa-check",
        "import json\n"
        "from confluent_kafka import Consumer, TopicPartition\n"
        f"c = Consumer({{'bootstrap.servers': {kafka_cluster!r}, 'group.id': 'e2e'}})\n"
        "lo, hi = c.get_watermark_offsets(TopicPartition('ad-click-counts', 0), timeout=30)\n"
        "c.assign([TopicPartition('ad-click-counts', 0, lo)])\n"
        "rows = [json.loads(m.value()) for m in c.consume(hi - lo, 60)]\n"
        "print(json.dumps({'windows': len(rows), 'clicks': sum(r['clicks'] for r in rows)}))\n",
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert result["windows"] > 10 and result["clicks"] > 0
