"""What a container image means here, with no container runtime: the local program that does
what the image would. Paths in the container (its volume mounts) become the pod's folders.

- the broker image (``.../samsa``): ``samsa ...`` runs ``python -m samsa.cli ...``; ``sh`` and
  ``bash`` scripts (the init container) run with the local shell;
- the operator image (``.../samsa-operator``): ``python -m samsa_operator`` with its args;
- the official ZooKeeper image (``zookeeper``): what its entrypoint does, a zoo.cfg from the
  ``ZOO_*`` environment and ``myid`` from the ordinal, then Debian's ZooKeeper server, bound
  to the pod's IP;
- the Spark image (``samsa-spark``, or Spark's own ``spark``): what Spark's entrypoint.sh does
  for the pods Spark on Kubernetes makes, with the local PySpark as ``SPARK_HOME`` and this
  interpreter as the Python. ``driver`` runs spark-submit in client mode bound to the pod's IP,
  its Kubernetes client pointed at the API server with the pod's ServiceAccount token (the
  in-cluster address, kubernetes.default.svc on 443, has no kube-proxy here); ``executor``
  runs KubernetesExecutorBackend from the ``SPARK_*`` environment. The image's job folder,
  ``/opt/samsa/jobs``, is this checkout's ``spark-on-k8s/jobs``;
- the Kubeflow spark-operator's image (``kubeflow/spark-operator/controller``): its controller,
  built by `make k8s`, with the local PySpark as the ``SPARK_HOME`` whose spark-submit it runs,
  and the API server as the in-cluster address (``KUBERNETES_SERVICE_HOST``/``PORT``, which it
  gives spark-submit as the master). Its health probe binds the pod's IP.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from samsa.local_cluster.zookeeper import MAIN_CLASS, zookeeper_classpath
from samsa_dev.kube.build import binary
from samsa_dev.programs import ProgramUnavailable

# The admin server (the pods' readiness probe asks it `ruok`) needs the servlet API, which
# Debian's ZooKeeper does not name on its classpath (package libservlet-api-java); its log
# goes to stdout through slf4j-simple.
ZOOKEEPER_EXTRA_JARS = ("/usr/share/java/servlet-api.jar", "/usr/share/java/slf4j-simple.jar")


class UnknownImage(ValueError):
    pass


def repository(image: str) -> str:
    """``ghcr.io/samsa-dev/samsa:0.1.0`` -> ``ghcr.io/samsa-dev/samsa``."""
    name = image.split("@", 1)[0]
    head, _, tail = name.rpartition(":")
    return head if head and "/" not in tail else name


def mapped(text: str, mounts: dict[str, Path]) -> str:
    """Every container path under a mount, as the folder it is here (in one pass, a path
    starting where no other path character precedes it, the longest mount first)."""
    if not mounts:
        return text
    paths = sorted(mounts, key=len, reverse=True)
    pattern = r"(?<![\w./-])(" + "|".join(re.escape(p) for p in paths) + r")(?![\w.-])"
    return re.sub(pattern, lambda m: str(mounts[m.group(1)]), text)


def zookeeper_config(
    env: dict[str, str], pod_ip: str, ordinal: int, mounts: dict[str, Path]
) -> str:
    """zoo.cfg as the official image's entrypoint writes it, with every address the pod's."""
    data = mapped(env.get("ZOO_DATA_DIR", "/data"), mounts)
    lines = [
        f"dataDir={data}",
        f"dataLogDir={mapped(env.get('ZOO_DATA_LOG_DIR', '/datalog'), mounts)}",
        f"tickTime={env.get('ZOO_TICK_TIME', '2000')}",
        f"initLimit={env.get('ZOO_INIT_LIMIT', '5')}",
        f"syncLimit={env.get('ZOO_SYNC_LIMIT', '2')}",
        f"maxClientCnxns={env.get('ZOO_MAX_CLIENT_CNXNS', '60')}",
        f"standaloneEnabled={env.get('ZOO_STANDALONE_ENABLED', 'true')}",
        f"admin.enableServer={env.get('ZOO_ADMINSERVER_ENABLED', 'true')}",
        f"admin.serverAddress={pod_ip}",
        "admin.serverPort=8080",
        f"4lw.commands.whitelist={env.get('ZOO_4LW_COMMANDS_WHITELIST', 'srvr')}",
        "clientPort=2181",
        f"clientPortAddress={pod_ip}",
    ]
    # server.N=host:2888:3888;2181: the client part is dropped, the address above serves.
    for server in env.get("ZOO_SERVERS", "server.1=localhost:2888:3888;2181").split():
        lines.append(server.split(";", 1)[0])
    Path(data).mkdir(parents=True, exist_ok=True)
    (Path(data) / "myid").write_text(f"{ordinal + 1}\n")
    return "\n".join(lines) + "\n"


def is_spark(image: str) -> bool:
    return repository(image).rsplit("/", 1)[-1] in ("samsa-spark", "spark")


def is_spark_operator(image: str) -> bool:
    return repository(image).endswith("kubeflow/spark-operator/controller")


def in_cluster_client(image: str) -> bool:
    """Whether the image's programs talk to the API server with the pod's ServiceAccount, as
    in-cluster config (which the agent turns into a kubeconfig: there is no in-cluster address
    here): the operators, and the Spark jobs' driver reading a KafkaCluster's status."""
    return (
        repository(image).endswith("/samsa-operator") or is_spark(image) or is_spark_operator(image)
    )


# Where the Spark image keeps what Spark on Kubernetes names in its pods.
SPARK_JOBS = "/opt/samsa/jobs"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise UnknownImage(f"the Spark image needs the {name} package installed here")
    return Path(spec.origin).parent


def _with_env(setting: Mapping[str, str]) -> list[str]:
    """`env K=V ...`, the front of a command line run with these variables set."""
    return ["env", *(f"{k}={v}" for k, v in setting.items())]


def _spark_path(arg: str, mounts: dict[str, Path]) -> str:
    """A container path (or a ``local://`` URI of one) as the path it is here."""
    scheme = "local://" if arg.startswith("local://") else ""
    return scheme + mapped(arg[len(scheme) :], mounts)


def spark_command(
    container: Mapping[str, Any],
    env: dict[str, str],
    mounts: dict[str, Path],
    pod_ip: str,
    api_server: str,
    spark_home: Path,
    jobs: Path,
    scratch: Path,
) -> list[str]:
    """Spark's entrypoint.sh for its ``driver`` and ``executor`` pods, run here. The driver's
    properties file names container paths too (the executors' pod template, mounted from a
    ConfigMap): a copy with them mapped goes to `scratch`."""
    args = [str(a) for a in container.get("args") or []]
    paths: dict[str, Path] = {SPARK_JOBS: jobs, **mounts}
    setting: dict[str, str] = {
        "SPARK_HOME": str(spark_home),
        "PYSPARK_PYTHON": sys.executable,
        # The in-image paths Spark's pod spec gives these point at the pod's folders.
        **{
            k: mapped(env[k], paths)
            for k in ("SPARK_LOCAL_DIRS", "SPARK_CONF_DIR", "SPARK_EXECUTOR_DIRS")
            if k in env
        },
    }
    prefix = _with_env(setting)
    if args[:1] == ["driver"]:
        token = mounts.get(SERVICE_ACCOUNT)
        client = ["--conf", f"spark.kubernetes.driver.master={api_server}"]
        if token is not None:
            auth = "spark.kubernetes.authenticate.driver.mounted"
            client += ["--conf", f"{auth}.oauthTokenFile={token / 'token'}"]
            client += ["--conf", f"{auth}.caCertFile={token / 'ca.crt'}"]
        bind = env.get("SPARK_DRIVER_BIND_ADDRESS") or pod_ip
        rest = [_spark_path(a, paths) for a in args[1:]]
        if "--properties-file" in rest[:-1]:
            at = rest.index("--properties-file") + 1
            local = scratch / "spark.properties"
            local.write_text(mapped(Path(rest[at]).read_text(), paths))
            rest[at] = str(local)
        return [
            *prefix,
            str(spark_home / "bin" / "spark-submit"),
            "--conf",
            f"spark.driver.bindAddress={bind}",
            *client,
            "--deploy-mode",
            "client",
            *rest,
        ]
    if args[:1] == ["executor"]:
        java_opts = [
            env[k]
            for k in sorted(
                (k for k in env if k.startswith("SPARK_JAVA_OPT_")),
                key=lambda k: int(k.rsplit("_", 1)[1]),
            )
        ]
        conf_dir = setting.get("SPARK_CONF_DIR", str(spark_home / "conf"))
        memory = env.get("SPARK_EXECUTOR_MEMORY", "1g")
        return [
            *prefix,
            "java",
            *java_opts,
            f"-Xms{memory}",
            f"-Xmx{memory}",
            "-cp",
            f"{conf_dir}:{spark_home / 'jars'}/*",
            EXECUTOR_BACKEND,
            "--driver-url",
            env["SPARK_DRIVER_URL"],
            "--executor-id",
            env["SPARK_EXECUTOR_ID"],
            "--cores",
            env.get("SPARK_EXECUTOR_CORES", "1"),
            "--app-id",
            env["SPARK_APPLICATION_ID"],
            "--hostname",
            env.get("SPARK_EXECUTOR_POD_IP") or pod_ip,
            "--resourceProfileId",
            env.get("SPARK_RESOURCE_PROFILE_ID", "0"),
            "--podName",
            env.get("SPARK_EXECUTOR_POD_NAME", ""),
        ]
    raise UnknownImage(f"the Spark image runs driver or executor pods, not {args[:1]}")


def spark_operator_command(
    container: Mapping[str, Any],
    pod_ip: str,
    api_server: str,
    program: Path,
    spark_home: Path,
) -> list[str]:
    """The spark-operator's entrypoint, run here (its webhook is not served: the API server
    here cannot call into a pod without a Service proxy)."""
    args = [str(a) for a in container.get("args") or []]
    if args[:1] != ["controller"]:
        raise UnknownImage(f"the spark-operator image runs its controller here, not {args[:1]}")
    address = urlsplit(api_server)
    setting = {
        "SPARK_HOME": str(spark_home),
        "PYSPARK_PYTHON": sys.executable,
        "KUBERNETES_SERVICE_HOST": address.hostname or "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(address.port or 443),
    }
    return [
        *_with_env(setting),
        str(program),
        *(_on_pod_ip(a, pod_ip) for a in args),
        # Not in the chart's arguments: its default, ":8081", would be every address here.
        f"--health-probe-bind-address={pod_ip}:8081",
    ]


def _on_pod_ip(arg: str, pod_ip: str) -> str:
    """``--metrics-bind-address=:8080`` binds every address of the machine here, where a pod
    is only its IP: the pod's IP and that port."""
    flag, eq, value = arg.partition("=")
    if flag.endswith("-bind-address") and eq and value.startswith(":"):
        return f"{flag}={pod_ip}{value}"
    return arg


def command(
    image: str,
    container: dict[str, object],
    env: dict[str, str],
    mounts: dict[str, Path],
    pod_ip: str,
    ordinal: int,
    scratch: Path,
    api_server: str = "",
) -> list[str]:
    """The local command line that plays this container."""
    repo = repository(image)
    if is_spark(image):
        return spark_command(
            container,
            env,
            mounts,
            pod_ip,
            api_server,
            _package_dir("pyspark"),
            _package_dir("samsa_spark").parent / "jobs",
            scratch,
        )
    if is_spark_operator(image):
        try:
            program = binary("spark-operator")
        except ProgramUnavailable as exc:
            raise UnknownImage(str(exc)) from exc
        return spark_operator_command(
            container, pod_ip, api_server, program, _package_dir("pyspark")
        )
    cmd = [str(c) for c in container.get("command") or []]  # type: ignore[attr-defined]
    args = [str(a) for a in container.get("args") or []]  # type: ignore[attr-defined]
    if repo.endswith("/samsa-operator"):
        return [sys.executable, "-m", "samsa_operator", *args]
    if repo.endswith("/samsa"):
        argv = [mapped(a, mounts) for a in cmd + args]
        if argv and argv[0] == "samsa":
            return [sys.executable, "-m", "samsa.cli", *argv[1:]]
        if argv and argv[0] in ("sh", "bash", "/bin/sh", "/bin/bash"):
            return ["sh", *argv[1:]]
        raise UnknownImage(f"{image}: no local program for the command {cmd + args}")
    if repo.rsplit("/", 1)[-1] == "zookeeper":
        config = scratch / "zoo.cfg"
        config.write_text(zookeeper_config(env, pod_ip, ordinal, mounts))
        return [
            "java",
            "-Xmx128m",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.log.dir=" + str(scratch),
            "-cp",
            ":".join(
                [zookeeper_classpath(), *(j for j in ZOOKEEPER_EXTRA_JARS if Path(j).exists())]
            ),
            MAIN_CLASS,
            str(config),
        ]
    raise UnknownImage(f"the node agent cannot run the image {image}")
