"""The node agent's pure parts: pod addresses, what an image runs here, the files it writes."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import pytest

from samsa_dev.kube import images
from samsa_dev.kube.agent import _expand, _format_map, finished_phase, pod_ip, restarts


def test_each_pod_has_a_loopback_address_of_its_own_away_from_127_0_x() -> None:
    addresses = {pod_ip(f"uid-{i}") for i in range(2000)}
    assert len(addresses) >= 1990  # a clash is rare, and only matters within one run
    for a in addresses:
        ip = ipaddress.ip_address(a)
        assert ip.is_loopback and not a.startswith("127.0.") and not a.endswith(".0")
    assert pod_ip("same") == pod_ip("same")


def test_images_become_local_programs_with_container_paths_mapped(tmp_path: Path) -> None:
    mounts = {"/var/lib/samsa": tmp_path / "pv", "/var/run/samsa": tmp_path / "run"}
    broker = {
        "command": ["samsa", "broker"],
        "args": [
            "--data-dir",
            "/var/lib/samsa/data",
            "--config",
            "/var/run/samsa/server.properties",
        ],
    }
    argv = images.command(
        "ghcr.io/samsa-dev/samsa:0.1.0", broker, {}, mounts, "127.1.2.3", 0, tmp_path
    )
    assert argv == [
        sys.executable, "-m", "samsa.cli", "broker",
        "--data-dir", f"{tmp_path}/pv/data", "--config", f"{tmp_path}/run/server.properties",
    ]  # fmt: skip
    init = {"command": ["sh", "-c", "cp /var/run/samsa/a /var/lib/samsa/b; ls /var/lib/samsax"]}
    argv = images.command(
        "ghcr.io/samsa-dev/samsa:0.1.0", init, {}, mounts, "127.1.2.3", 0, tmp_path
    )
    assert argv == ["sh", "-c", f"cp {tmp_path}/run/a {tmp_path}/pv/b; ls /var/lib/samsax"]
    operator = {"args": ["--verbose"]}
    argv = images.command(
        "ghcr.io/samsa-dev/samsa-operator:0.1.0", operator, {}, {}, "", 0, tmp_path
    )
    assert argv == [sys.executable, "-m", "samsa_operator", "--verbose"]
    with pytest.raises(images.UnknownImage, match="busybox"):
        images.command("busybox:1", {"command": ["sleep"]}, {}, {}, "", 0, tmp_path)


def test_zookeeper_gets_the_config_its_entrypoint_writes_bound_to_the_pod(tmp_path: Path) -> None:
    env = {
        "ZOO_SERVERS": "server.1=zk-0.zk.ns.svc:2888:3888;2181 "
        "server.2=zk-1.zk.ns.svc:2888:3888;2181",
        "ZOO_STANDALONE_ENABLED": "false",
        "ZOO_DATA_DIR": "/data",
        "ZOO_DATA_LOG_DIR": "/datalog",
    }
    mounts = {"/data": tmp_path / "data", "/datalog": tmp_path / "datalog"}
    text = images.zookeeper_config(env, "127.9.9.9", 1, mounts)
    lines = text.splitlines()
    assert f"dataDir={tmp_path}/data" in lines and f"dataLogDir={tmp_path}/datalog" in lines
    assert "clientPortAddress=127.9.9.9" in lines and "admin.serverAddress=127.9.9.9" in lines
    assert "server.2=zk-1.zk.ns.svc:2888:3888" in lines
    assert (tmp_path / "data" / "myid").read_text() == "2\n"


def test_downward_api_files_and_variables_read_as_the_kubelet_writes_them() -> None:
    text = _format_map({"b": "2", "kafka.samsa.dev/rack": "zone-1"})
    assert text == 'b="2"\nkafka.samsa.dev/rack="zone-1"'
    assert _expand("$(A):$(B)", {"A": "x"}) == "x:$(B)"


def test_spark_pods_run_the_entrypoints_modes_on_the_local_pyspark(tmp_path: Path) -> None:
    conf, token = tmp_path / "conf", tmp_path / "sa"
    conf.mkdir()
    (conf / "spark.properties").write_text(
        "spark.app.name=report\n"
        "spark.kubernetes.executor.podTemplateFile=/opt/spark/pod-template/pod-spec-template.yml\n"
    )
    mounts = {
        "/opt/spark/conf": conf,
        "/opt/spark/pod-template": tmp_path / "template",
        "/var/run/secrets/kubernetes.io/serviceaccount": token,
        "/var/data/spark-1": tmp_path / "local",
    }
    home, jobs = tmp_path / "pyspark", tmp_path / "jobs"
    driver = {
        "args": [
            "driver",
            "--properties-file",
            "/opt/spark/conf/spark.properties",
            "--class",
            "org.apache.spark.deploy.PythonRunner",
            "local:///opt/samsa/jobs/lag_report.py",
            "--topics",
            "clicks",
        ]
    }
    env = {
        "SPARK_DRIVER_BIND_ADDRESS": "127.9.9.9",
        "SPARK_LOCAL_DIRS": "/var/data/spark-1",
        "SPARK_CONF_DIR": "/opt/spark/conf",
    }
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = images.spark_command(
        driver, env, mounts, "127.9.9.9", "https://127.0.0.1:6443", home, jobs, scratch
    )
    assert argv[0] == "env"
    assert f"SPARK_HOME={home}" in argv and f"PYSPARK_PYTHON={sys.executable}" in argv
    assert f"SPARK_LOCAL_DIRS={tmp_path / 'local'}" in argv
    submit = argv.index(str(home / "bin" / "spark-submit"))
    assert argv[submit + 1 :] == [
        "--conf",
        "spark.driver.bindAddress=127.9.9.9",
        "--conf",
        "spark.kubernetes.driver.master=https://127.0.0.1:6443",
        "--conf",
        f"spark.kubernetes.authenticate.driver.mounted.oauthTokenFile={token / 'token'}",
        "--conf",
        f"spark.kubernetes.authenticate.driver.mounted.caCertFile={token / 'ca.crt'}",
        "--deploy-mode",
        "client",
        "--properties-file",
        str(scratch / "spark.properties"),
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        f"local://{jobs / 'lag_report.py'}",
        "--topics",
        "clicks",
    ]
    # The properties' container paths are the pod's folders too; the original is untouched.
    assert (
        f"podTemplateFile={tmp_path / 'template' / 'pod-spec-template.yml'}"
        in (scratch / "spark.properties").read_text()
    )
    assert "/opt/spark/pod-template/" in (conf / "spark.properties").read_text()

    executor_env = {
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@report-svc.ns.svc:7078",
        "SPARK_EXECUTOR_ID": "1",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_EXECUTOR_MEMORY": "512m",
        "SPARK_APPLICATION_ID": "spark-1",
        "SPARK_EXECUTOR_POD_IP": "127.8.8.8",
        "SPARK_EXECUTOR_POD_NAME": "report-exec-1",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_JAVA_OPT_10": "-Dlast",
        "SPARK_JAVA_OPT_2": "-Dfirst",
        "SPARK_CONF_DIR": "/opt/spark/conf",
    }
    argv = images.spark_command(
        {"args": ["executor"]}, executor_env, mounts, "127.8.8.8", "", home, jobs, scratch
    )
    java = argv.index("java")
    assert argv[java + 1 : java + 6] == ["-Dfirst", "-Dlast", "-Xms512m", "-Xmx512m", "-cp"]
    assert argv[java + 6] == f"{conf}:{home / 'jars'}/*"
    assert argv[java + 7 :] == [
        images.EXECUTOR_BACKEND,
        "--driver-url",
        "spark://CoarseGrainedScheduler@report-svc.ns.svc:7078",
        "--executor-id",
        "1",
        "--cores",
        "2",
        "--app-id",
        "spark-1",
        "--hostname",
        "127.8.8.8",
        "--resourceProfileId",
        "0",
        "--podName",
        "report-exec-1",
    ]
    with pytest.raises(images.UnknownImage, match="driver or executor"):
        images.spark_command({"args": ["bash"]}, {}, {}, "", "", home, jobs, scratch)
    assert images.is_spark("samsa-spark:0.1.0") and images.is_spark("apache/spark:4.2.0")
    assert images.in_cluster_client("samsa-spark:0.1.0")
    assert not images.in_cluster_client("ghcr.io/samsa-dev/samsa:0.1.0")


def test_the_spark_operator_runs_its_controller_with_the_local_spark(tmp_path: Path) -> None:
    """Its chart's arguments, every listener on the pod's IP, spark-submit from the local
    PySpark, and the API server as the in-cluster address it gives spark-submit as master."""
    program, home = tmp_path / "spark-operator", tmp_path / "pyspark"
    image = "ghcr.io/kubeflow/spark-operator/controller:2.5.1"
    assert images.is_spark_operator(image) and images.in_cluster_client(image)
    container = {
        "args": ["controller", "start", "--namespaces=jobs", "--metrics-bind-address=:8080"]
    }
    argv = images.spark_operator_command(
        container, "127.1.2.3", "https://127.0.0.1:6443", program, home
    )
    at = argv.index(str(program))
    env = dict(a.split("=", 1) for a in argv[1:at])
    assert argv[0] == "env"
    assert env["SPARK_HOME"] == str(home) and env["PYSPARK_PYTHON"] == sys.executable
    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", "6443")
    assert argv[at + 1 :] == [
        "controller",
        "start",
        "--namespaces=jobs",
        "--metrics-bind-address=127.1.2.3:8080",
        "--health-probe-bind-address=127.1.2.3:8081",
    ]
    # Its webhook is not run here (the API server cannot reach a pod): said, not half-run.
    with pytest.raises(images.UnknownImage, match="controller"):
        images.spark_operator_command(
            {"args": ["webhook", "start"]}, "127.1.2.3", "https://127.0.0.1:6443", program, home
        )


@pytest.mark.parametrize(
    ("policy", "code", "again"),
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 3, True),
        ("Never", 0, False),
        ("Never", 1, False),
    ],
)
def test_an_exited_container_starts_again_as_its_restart_policy_says(
    policy: str, code: int, again: bool
) -> None:
    assert restarts(policy, code) is again


def test_a_pod_whose_containers_all_exited_succeeded_only_if_every_one_exited_0() -> None:
    assert finished_phase([0, 0]) == "Succeeded"
    assert finished_phase([0, 1]) == "Failed"
    assert finished_phase([137]) == "Failed"
