"""Spark on a real Kubernetes, as a user runs the shipped manifests of spark-on-k8s/manifests
against a KafkaCluster of the operator's: job (a), AdClickEvents, reads clicks from one topic
and appends each closed window's count to another, exactly once.

- ``spark_submit``: the shipped Job runs spark-submit in cluster mode from inside the
  cluster; its driver and 2 executors run as pods of the Spark image and the job stops once
  the input is processed (`--available-now`).
- ``spark_application``: the shipped SparkApplication, run by the Kubeflow spark-operator
  with its admission webhook serving; its driver is killed (SIGKILL, from outside its
  container) and more input comes while it is down; the spark-operator submits it again,
  and it goes on from its checkpoint on the PersistentVolumeClaim: every closed window once.

The topics' records are written and read by pods of the Spark image (its Python has
samsa_spark and confluent_kafka): the brokers' names resolve inside the cluster only."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from e2e_support import within

from samsa_spark.generator import closed_window_counts, generate

MANIFESTS = Path(__file__).resolve().parents[2] / "spark-on-k8s" / "manifests"
IMAGE = "samsa-spark:0.1.0"
CLUSTER = "samsa"
SOURCE, SINK = "ad-clicks", "ad-click-counts"
IMPRESSIONS, SEED = 3000, 11
APPLICATION = "samsa-ad-clicks"


@dataclass
class SparkTarget:
    """A namespace of a Kubernetes with the samsa operator watching it."""

    kubectl: Callable[..., str]
    namespace: str
    # SIGKILL a container of a pod, from outside it: (pod, container).
    kill: Callable[[str, str], None]


def clicks_in_halves() -> tuple[list[Any], list[Any]]:
    """The generated clicks by event time, in two halves: every click of the second is at
    or after the last of the first, so the second makes none of the first late."""
    _imps, clicks = generate(IMPRESSIONS, seed=SEED)
    clicks.sort(key=lambda c: c.event_time_ms)
    return clicks[: len(clicks) // 2], clicks[len(clicks) // 2 :]


def expected(clicks: list[Any]) -> dict[tuple[str, str], int]:
    return closed_window_counts(clicks)


def network_policies(namespace: str, release: str, release_namespace: str) -> str:
    """The spark-operator's upstream image runs Spark 4.0's spark-submit; its controller here
    runs Spark 4.2's (the image built here, or the local PySpark's on the node agent), which
    also puts the application behind a NetworkPolicy. The chart's RBAC predates that: its
    controller, whose ServiceAccount is in `release_namespace`, may manage them in the job
    namespace."""
    name = f"{release}-controller-network-policies"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": [
            {
                "apiGroups": ["networking.k8s.io"],
                "resources": ["networkpolicies"],
                "verbs": ["create", "get", "list", "watch", "patch", "delete", "deletecollection"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": f"{release}-controller",
                "namespace": release_namespace,
            }
        ],
    }
    return yaml.safe_dump_all([role, binding])


class Spark:
    def __init__(self, target: SparkTarget) -> None:
        self.t = target
        self.ns = target.namespace

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return self.t.kubectl("-n", self.ns, *args, stdin=stdin)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))

    def apply(self, *docs: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def shipped(self, name: str) -> list[dict[str, Any]]:
        """A shipped manifest as a user applies it to this namespace."""
        docs = [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]
        for d in docs:
            d["metadata"]["namespace"] = self.ns
            for s in d.get("subjects") or []:
                s["namespace"] = self.ns
        return docs

    # -- the Kafka side -------------------------------------------------------------------

    def kafka_cluster(self) -> str:
        """A one-broker KafkaCluster named as the manifests name it, and job (a)'s topics;
        the brokers' bootstrap address."""
        one = {"replicas": 1}
        config = {
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "default.replication.factor": 1,
        }
        topics = [
            {
                "apiVersion": "kafka.samsa.dev/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"clusterRef": CLUSTER, "partitions": n, "replicationFactor": 1},
            }
            for name, n in ((SOURCE, 6), (SINK, 1))
        ]
        self.apply(
            {
                "apiVersion": "kafka.samsa.dev/v1alpha1",
                "kind": "KafkaCluster",
                "metadata": {"name": CLUSTER, "namespace": self.ns},
                "spec": {"brokers": one, "zookeeper": one, "config": config},
            },
            *topics,
        )
        self.kubectl("wait", "--for=condition=Ready", f"kc/{CLUSTER}", "--timeout=400s")
        self.kubectl("wait", "--for=condition=Ready", "topic", "--all", "--timeout=120s")
        status = self.get("kc", CLUSTER)["status"]
        return str(status["bootstrapServers"]["internal"])

    def python(self, name: str, code: str, seconds: float = 300) -> str:
        """Python in a pod of the Spark image, to its end; its output."""
        context = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python3", "-c", code],
                        "securityContext": context,
                    }
                ],
            },
        }
        self.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true")
        self.apply(pod)

        def finished() -> str | None:
            phase = self.get("pod", name)["status"].get("phase")
            return str(phase) if phase in ("Succeeded", "Failed") else None

        phase = within(finished, seconds, f"the pod {name} to finish", every=3)
        out = self.kubectl("logs", name)
        assert phase == "Succeeded", out[-3000:]
        return out

    def publish(self, bootstrap: str, half: int) -> None:
        code = (
            "from samsa_spark.generator import generate, publish\n"
            f"_, clicks = generate({IMPRESSIONS}, seed={SEED})\n"
            "clicks.sort(key=lambda c: c.event_time_ms)\n"
            "n = len(clicks) // 2\n"
            f"part = clicks[:n] if {half} == 0 else clicks[n:]\n"
            f"publish({bootstrap!r}, {SOURCE!r}, part, {{'enable.idempotence': True}})\n"
        )
        self.python(f"publish-{half}", code)

    def windows(self, bootstrap: str) -> list[dict[str, Any]]:
        """What the job has committed to its sink so far, read_committed."""
        code = (
            "import json\n"
            "from confluent_kafka import Consumer, TopicPartition\n"
            f"c = Consumer({{'bootstrap.servers': {bootstrap!r}, 'group.id': 'checker',\n"
            "    'enable.auto.commit': False, 'isolation.level': 'read_committed'})\n"
            f"tp = TopicPartition({SINK!r}, 0)\n"
            "_, high = c.get_watermark_offsets(tp, timeout=30)\n"
            f"c.assign([TopicPartition({SINK!r}, 0, 0)])\n"
            "rows = []\n"
            "while high and len(rows) < high:\n"
            "    batch = c.consume(1000, 2.0)\n"
            "    if not batch:\n"
            "        break  # the rest is transaction markers, or not committed yet\n"
            "    rows += [json.loads(m.value()) for m in batch if not m.error()]\n"
            "print(json.dumps(rows))\n"
        )
        return list(json.loads(self.python("windows", code).strip().splitlines()[-1]))

    def counted(self, bootstrap: str) -> dict[tuple[str, str], int]:
        """The sink's windows, each once: a window appended twice fails."""
        rows = self.windows(bootstrap)
        got = {(r["campaign_id"], r["window_start"]): r["clicks"] for r in rows}
        twice = len(rows) - len(got)
        assert not twice, f"{twice} windows appended more than once"
        return got

    def spark_pods(self, role: str) -> list[dict[str, Any]]:
        return list(self.get("pods", "-l", f"spark-role={role}")["items"])

    def shipped_base(self) -> None:
        self.apply(*self.shipped("rbac.yaml"), *self.shipped("checkpoints-pvc.yaml"))

    # -- the scenarios --------------------------------------------------------------------

    def spark_submit(self) -> None:
        """The shipped Job, its job stopping once the input is processed: a driver and 2
        executors as pods of the Spark image, every closed window counted once."""
        bootstrap = self.kafka_cluster()
        self.shipped_base()
        first, second = clicks_in_halves()
        self.publish(bootstrap, 0)
        self.publish(bootstrap, 1)
        configmap, job = self.shipped("ad-clicks-spark-submit.yaml")
        [submit] = job["spec"]["template"]["spec"]["containers"]
        command: list[str] = submit["command"]
        command[command.index("spark.kubernetes.namespace=samsa")] = (
            f"spark.kubernetes.namespace={self.ns}"
        )
        app = command.index("local:///opt/samsa/jobs/ad_clicks.py")
        # Kept after the job, to be looked at (Spark deletes them by default).
        command[app:app] = ["--conf", "spark.kubernetes.executor.deleteOnTermination=false"]
        command.append("--available-now")
        self.apply(configmap, job)

        def driver_done() -> str | None:
            phases = [p["status"].get("phase") for p in self.spark_pods("driver")]
            if "Failed" in phases:
                logs = self.kubectl("logs", "-l", "spark-role=driver", "--tail=100")
                raise AssertionError(f"the driver failed:\n{logs}")
            return "done" if "Succeeded" in phases else None

        within(driver_done, 900, "the driver to process the input and stop", every=3)
        [driver] = self.spark_pods("driver")
        executors = self.spark_pods("executor")
        assert len(executors) == 2, [e["metadata"]["name"] for e in executors]
        for pod in (driver, *executors):
            assert pod["spec"]["containers"][0]["image"] == IMAGE
        for ex in executors:
            [owner] = ex["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"]) == ("Pod", driver["metadata"]["name"])
        assert self.counted(bootstrap) == expected(first + second)

    def spark_application(self, operator_release: str) -> None:
        """The shipped SparkApplication through the spark-operator and its webhook; the
        driver killed, more input published while it is down, submitted again, on from its
        checkpoint."""
        bootstrap = self.kafka_cluster()
        self.shipped_base()
        [app] = self.shipped("ad-clicks-sparkapplication.yaml")
        spec = app["spec"]
        spec["sparkConf"]["spark.sql.shuffle.partitions"] = "2"
        # Only the webhook puts an application's own volumes in its pods: a scratch folder.
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        spec["driver"]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
        first, second = clicks_in_halves()
        self.publish(bootstrap, 0)
        self.apply(app)

        def running() -> str | None:
            found = self.get("sparkapplication", APPLICATION)
            state = ((found.get("status") or {}).get("applicationState") or {}).get("state")
            assert state not in ("FAILED", "SUBMISSION_FAILED"), found.get("status")
            return str(state) if state == "RUNNING" else None

        within(running, 600, "the SparkApplication RUNNING", every=3)
        driver_name = f"{APPLICATION}-driver"
        driver = self.get("pod", driver_name)
        mounts = driver["spec"]["containers"][0].get("volumeMounts") or []
        assert "/scratch" in {m["mountPath"] for m in mounts}, "the webhook did not mutate"
        checkpoint = next(m for m in mounts if m["name"] == "checkpoints")
        assert checkpoint["mountPath"] == "/checkpoints"
        half = expected(first)

        def first_half() -> bool:
            status = self.get("sparkapplication", APPLICATION).get("status") or {}
            if int(status.get("executionAttempts", 1)) > 1:
                events = self.kubectl("get", "events", "--field-selector", "type=Warning")
                raise AssertionError(f"the driver failed before it was killed:\n{events}")
            return len(self.counted(bootstrap)) >= len(half)

        within(first_half, 600, "the first half's windows", every=3)

        # The driver killed, and the rest of the input published while it is down. Killed
        # after reading new input instead, it could die between a batch's commit and the
        # no-data batch that emits the windows the batch's watermark closes: Spark keeps a
        # batch's watermark only in the next batch's offsets, so the restarted query waits
        # for more input before it emits them (seen once: every window once, but not all).
        uid = driver["metadata"]["uid"]
        self.t.kill(driver_name, "spark-kubernetes-driver")
        self.publish(bootstrap, 1)

        def again() -> bool:
            pods = {p["metadata"]["name"]: p for p in self.spark_pods("driver")}
            new = pods.get(driver_name)
            return bool(
                new and new["metadata"]["uid"] != uid and new["status"].get("phase") == "Running"
            )

        within(again, 600, "the driver submitted again and running", every=3)
        everything = expected(first + second)
        within(
            lambda: len(self.counted(bootstrap)) >= len(everything),
            600,
            "every closed window",
            every=3,
        )
        assert self.counted(bootstrap) == everything
        status = self.get("sparkapplication", APPLICATION)["status"]
        assert int(status.get("executionAttempts", 0)) >= 2, status
        self.kubectl("delete", "sparkapplication", APPLICATION, "--wait=false")
