"""The Spark-on-Kubernetes manifests validate: Kubernetes objects with kubernetes-validate
(strict, several Kubernetes versions), the SparkApplications against the spark-operator's CRD
schema kept in spark-on-k8s/schemas, and the pieces fit together (account, claim, image, and the
image's Kafka connector jars, which are the jar set spark-kafka)."""

from __future__ import annotations

import copy
import hashlib
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from openapi_schema_validator import OAS30Validator

from samsa_dev import jars

HERE = Path(__file__).resolve().parents[1]
MANIFESTS = HERE / "manifests"
CRD = HERE / "schemas" / "sparkoperator.k8s.io_sparkapplications.yaml"
K8S_VERSIONS = ["1.30.0", "1.33.0", kubernetes_validate.latest_version()]


def _docs() -> list[dict[str, Any]]:
    return [
        d for f in sorted(MANIFESTS.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d
    ]


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in _docs() if d["kind"] == kind]


def _strict(schema: Any) -> Any:
    """Reject unknown fields, as the API server's strict field validation does: every object
    schema with properties and no other say gets additionalProperties: false."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _spark_app_validator() -> OAS30Validator:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return OAS30Validator(_strict(version["schema"]["openAPIV3Schema"]))


def _errors(validator: OAS30Validator, doc: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_objects_validate(version):
    docs = [d for d in _docs() if d["kind"] != "SparkApplication"]
    assert {d["kind"] for d in docs} >= {
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "PersistentVolumeClaim",
        "Job",
    }
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_spark_applications_validate_against_the_crd():
    validator = _spark_app_validator()
    apps = _by_kind("SparkApplication")
    assert len(apps) == 2
    for app in apps:
        assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
        assert _errors(validator, app) == [], app["metadata"]["name"]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_spark_application_pod_parts_validate_as_kubernetes_types(version):
    """The CRD copy keeps core types opaque; check them as the Pod the operator makes."""
    for app in _by_kind("SparkApplication"):
        _validate_pod_parts(app["spec"], version)


def _pod(spec: dict[str, Any], role: str) -> dict[str, Any]:
    """The pod spec of the driver's or executors' pod template, with the image spark-submit
    puts in its container."""
    pod = copy.deepcopy(spec[role]["template"]["spec"])
    [container] = pod["containers"]
    container["image"] = spec["image"]
    return dict(pod)


def _validate_pod_parts(spec: dict[str, Any], version: str) -> None:
    for role in ("driver", "executor"):
        part = spec[role]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"check-{role}", "labels": part.get("labels", {})},
            "spec": _pod(spec, role),
        }
        kubernetes_validate.validate(pod, version, strict=True)


SECURED = MANIFESTS / "secured" / "ad-clicks-sasl-ssl.yaml"


def _every_spark_application() -> list[dict[str, Any]]:
    secured = [d for d in yaml.safe_load_all(SECURED.read_text()) if d]
    return _by_kind("SparkApplication") + [d for d in secured if d["kind"] == "SparkApplication"]


@pytest.mark.parametrize("app", _every_spark_application(), ids=lambda a: a["metadata"]["name"])
def test_no_application_needs_the_spark_operators_webhook(app):
    """Without the spark-operator's admission webhook (webhook.enable=false, or the webhook
    down), the operator drops a SparkApplication's volumes and security contexts without a
    word: the checkpoint would not be on its volume, and a restricted namespace refuses the
    pods. Each pod's template carries them instead, which spark-submit merges."""
    spec = app["spec"]
    assert "volumes" not in spec
    for role in ("driver", "executor"):
        assert not {"securityContext", "volumeMounts", "podSecurityContext"} & set(spec[role])
        pod = _pod(spec, role)
        [container] = pod["containers"]
        # The container spark-submit merges into, by the name the spark-operator gives it.
        assert container["name"] == f"spark-kubernetes-{role}"
        mounted = {m["name"] for m in container["volumeMounts"]}
        assert mounted == {v["name"] for v in pod["volumes"]}
        assert "/checkpoints" in {m["mountPath"] for m in container["volumeMounts"]}


def test_validation_catches_mistakes():
    validator = _spark_app_validator()
    app = _by_kind("SparkApplication")[0]
    typo = copy.deepcopy(app)
    typo["spec"]["driver"]["memroy"] = typo["spec"]["driver"].pop("memory")
    assert any("memroy" in e for e in _errors(validator, typo))
    missing = copy.deepcopy(app)
    del missing["spec"]["mainApplicationFile"]
    assert any("mainApplicationFile" in e for e in _errors(validator, missing))
    bad_type = copy.deepcopy(app)
    bad_type["spec"]["type"] = "Perl"
    assert _errors(validator, bad_type)
    (role,) = _by_kind("Role")
    broken = copy.deepcopy(role)
    broken["rules"][0]["verbs"] = "get"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("app", _by_kind("SparkApplication"), ids=lambda a: a["metadata"]["name"])
def test_the_pieces_fit_together(app):
    (job,) = _by_kind("Job")
    (account,) = _by_kind("ServiceAccount")
    (claim,) = _by_kind("PersistentVolumeClaim")
    (role,) = _by_kind("Role")
    (binding,) = _by_kind("RoleBinding")
    spec = app["spec"]
    assert spec["driver"]["serviceAccount"] == account["metadata"]["name"]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "samsa-spark", "namespace": "samsa"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    for part in ("driver", "executor"):
        claims = {
            v["persistentVolumeClaim"]["claimName"]
            for v in _pod(spec, part)["volumes"]
            if "persistentVolumeClaim" in v
        }
        assert claims == {claim["metadata"]["name"]}
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert any(claim["metadata"]["name"] in c for c in command)
    # The bootstrap servers come from the KafkaCluster's status, in both ways of submitting.
    assert "--kafka-cluster" in spec["arguments"] and "--kafka-cluster" in command
    assert Path(spec["mainApplicationFile"]).name in {p.name for p in (HERE / "jobs").glob("*.py")}
    # Each application keeps its own checkpoint.
    checkpoints = [a["spec"]["arguments"] for a in _by_kind("SparkApplication")]
    assert len({args[args.index("--checkpoint") + 1] for args in checkpoints}) == len(checkpoints)
    # Least privilege: namespaced, no wildcard, and only `get` on the KafkaCluster.
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
    assert {"apiGroups": ["kafka.samsa.dev"], "resources": ["kafkaclusters"], "verbs": ["get"]} in (
        role["rules"]
    )
    # The image the manifests run is the one `make images` builds, and it is not root.
    from samsa_dev.images.catalogue import BY_NAME

    assert BY_NAME["spark"].ref == f"docker.io/library/{spec['image']}"
    dockerfile = (HERE / "Dockerfile").read_text()
    assert dockerfile.rstrip().splitlines()[-2] == "USER 185"
    for part in ("driver", "executor"):
        assert _pod(spec, part)["securityContext"]["runAsNonRoot"] is True


def test_one_application_runs_through_sparks_own_kafka_connector():
    formats = {}
    for app in _by_kind("SparkApplication"):
        args = app["spec"]["arguments"]
        formats[app["metadata"]["name"]] = (
            args[args.index("--format") + 1] if "--format" in args else "samsa"
        )
    assert sorted(formats.values()) == ["kafka", "samsa"]
    # Both versions of the same Spark: the image's and the one the operator is told.
    (base,) = re.findall(r"^ARG SPARK_IMAGE=spark:([0-9.]+)-python3$", _dockerfile(), re.M)
    assert {a["spec"]["sparkVersion"] for a in _by_kind("SparkApplication")} == {base}


def _dockerfile() -> str:
    return (HERE / "Dockerfile").read_text()


def test_the_image_bundles_the_jar_set_spark_kafka():
    """The image ADDs, and checks the sha256 of, exactly the jars `samsa-dev jars spark-kafka`
    fetches from the pom the tests run with, for the Spark version the image is built on."""
    urls = re.findall(r"^ADD --chmod=644 (\S+) /opt/spark/jars/$", _dockerfile(), re.M)
    added = dict(
        (jar, digest)
        for digest, jar in re.findall(r"^\s+([0-9a-f]{64}) (\S+) \\$", _dockerfile(), re.M)
    )
    assert sorted(url.rsplit("/", 1)[1] for url in urls) == sorted(added)
    fetched = {
        jar.name: hashlib.sha256(jar.read_bytes()).hexdigest() for jar in jars.files("spark-kafka")
    }
    assert len(fetched) == 4
    assert added == fetched
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.fromstring(jars.pom("spark-kafka"))
    pinned = {
        f"{d.findtext('m:artifactId', namespaces=ns)}-{d.findtext('m:version', namespaces=ns)}.jar"
        for d in pom.iterfind("m:dependencies/m:dependency", ns)
    }
    assert pinned == set(added)
    (base,) = re.findall(r"^ARG SPARK_IMAGE=spark:([0-9.]+)-python3$", _dockerfile(), re.M)
    assert f"spark-sql-kafka-0-10_2.13-{base}.jar" in added


def test_the_secured_application_authenticates_with_its_kafka_users_secret(tmp_path, monkeypatch):
    """manifests/secured: the KafkaUser (valid for the operator's CRD) and a SparkApplication
    that mounts the user's Secret and the cluster CA's, and turns them into SASL_SSL settings."""
    from samsa_operator import crds, models
    from samsa_spark import k8s
    from samsa_spark.jobs.common import arguments

    user, app = yaml.safe_load_all(SECURED.read_text())
    assert OAS30Validator(crds.openapi_schema("KafkaUser")).is_valid(user)
    models.parse_spec(models.KafkaUserSpec, user["spec"])
    assert _errors(_spark_app_validator(), app) == []
    for role in ("driver", "executor"):
        pod = _pod(app["spec"], role)
        secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        assert secrets == {
            "kafka-user": user["metadata"]["name"],
            "kafka-ca": f"{user['spec']['clusterRef']}-cluster-ca-cert",
        }
    # The arguments, with the Secrets as the operator writes them mounted under tmp_path.
    (tmp_path / "user").mkdir()
    (tmp_path / "ca").mkdir()
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="samsa-ad-clicks" password="s3cret";'
    )
    (tmp_path / "user" / "sasl.jaas.config").write_text(jaas)
    (tmp_path / "ca" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    argv = [
        a.replace("/etc/samsa/kafka-user", str(tmp_path / "user")).replace(
            "/etc/samsa/kafka-ca", str(tmp_path / "ca")
        )
        for a in app["spec"]["arguments"]
    ]
    # The driver bootstraps from the KafkaCluster's status, at the SASL_SSL listener.
    status = {
        "metadata": {"name": "samsa"},
        "status": {
            "bootstrapServers": {
                "internal": "samsa-kafka-bootstrap.samsa.svc:9092",
                "listeners": {"scram": "samsa-kafka-bootstrap.samsa.svc:9093"},
            }
        },
    }
    asked = []

    def from_cluster(name, namespace=None, listener=None):
        asked.append((name, listener))
        return k8s.bootstrap_of(status, listener)

    monkeypatch.setattr(k8s, "bootstrap_from_cluster", from_cluster)
    parsed = arguments("t", argv)
    assert asked == [("samsa", "scram")]
    assert parsed.bootstrap == "samsa-kafka-bootstrap.samsa.svc:9093"
    with pytest.raises(k8s.ClusterNotReady, match="no listener mtls"):
        k8s.bootstrap_of(status, "mtls")
    assert k8s.bootstrap_of(status) == "samsa-kafka-bootstrap.samsa.svc:9092"
    options = parsed.kafka_options
    assert options == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(tmp_path / "ca" / "ca.crt"),
    }


def _restricted(pod_security: dict[str, Any], container_security: dict[str, Any]) -> list[str]:
    """What the restricted Pod Security Standard refuses in one container's settings."""
    both = {**pod_security, **container_security}
    problems = []
    if both.get("runAsNonRoot") is not True:
        problems.append("runAsNonRoot")
    if container_security.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation")
    if "ALL" not in (container_security.get("capabilities") or {}).get("drop", []):
        problems.append("capabilities.drop ALL")
    if (both.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("seccompProfile")
    return problems


def test_every_pod_the_manifests_make_is_admitted_in_a_restricted_namespace():
    """The submitter Job, the SparkApplications' drivers and executors, and the pods spark-submit
    makes from the pod template (which the Job mounts from its ConfigMap, a copy kept equal)."""
    template = yaml.safe_load((MANIFESTS / "pod-templates" / "restricted.yaml").read_text())
    kubernetes_validate.validate(template, K8S_VERSIONS[-1], strict=True)
    tspec = template["spec"]
    assert _restricted(tspec["securityContext"], tspec["containers"][0]["securityContext"]) == []
    (job,) = _by_kind("Job")
    pod = job["spec"]["template"]["spec"]
    for c in pod["containers"]:
        assert _restricted(pod["securityContext"], c["securityContext"]) == [], c["name"]
    for app in _every_spark_application():
        for part in ("driver", "executor"):
            spark_pod = _pod(app["spec"], part)
            [c] = spark_pod["containers"]
            assert _restricted(spark_pod["securityContext"], c["securityContext"]) == [], part
    # spark-submit in the Job reads the template from its ConfigMap, mounted where it points.
    (config,) = [c for c in _by_kind("ConfigMap") if "restricted.yaml" in c.get("data", {})]
    assert yaml.safe_load(config["data"]["restricted.yaml"]) == template
    command = pod["containers"][0]["command"]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "pod-template"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "pod-template"]
    assert volume["configMap"]["name"] == config["metadata"]["name"]
    for part in ("driver", "executor"):
        conf = f"spark.kubernetes.{part}.podTemplateFile={mount['mountPath']}/restricted.yaml"
        assert conf in command
