"""The images `make images` builds, run for real: each archive imported into a containerd of
our own (its own root, state and socket; no CRI, no CNI) under the ref pods name, then run by
runc as the pods run them: the broker as uid 1000 on a read-only root filesystem answers
/readyz; ZooKeeper, started by the operator's own command and environment, answers `ruok` and
its admin server's /commands/ruok (the pods' readiness probe); pause and CoreDNS start. And a
second build is a cache hit. The first run builds the images (minutes); later runs find them
in the cache. Skipped, with the reason, where buildah or containerd is missing or not root."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa_dev import images
from samsa_operator import resources

pytestmark = pytest.mark.e2e

NAMES = ["broker", "operator", "zookeeper", "pause", "coredns"]
NAMESPACE = "k8s.io"


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "building and running images here needs root"
    for tool in ("buildah", "mmdebstrap", "containerd", "ctr", "runc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make setup)"
    return None


if _why_not():
    pytest.skip(str(_why_not()), allow_module_level=True)


class Containerd:
    """A containerd of our own, and ctr against it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket = folder / "containerd.sock"
        config = folder / "config.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{folder / "root"}"\n'
            f'state = "{folder / "state"}"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'[grpc]\n  address = "{self.socket}"\n'
            '[metrics]\n  address = ""\n'
            f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{folder / "opt"}"\n'
        )
        self.log = (folder / "containerd.log").open("w")
        self.process = subprocess.Popen(
            ["containerd", "--config", str(config)], stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 30
        while subprocess.run(self.ctr("version"), capture_output=True).returncode != 0:
            assert self.process.poll() is None, (folder / "containerd.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "containerd did not answer in 30 s"
            time.sleep(0.2)

    def ctr(self, *args: str) -> list[str]:
        return ["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args]

    def run(self, *args: str, timeout: float = 120) -> str:
        out = subprocess.run(self.ctr(*args), capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, f"ctr {' '.join(args)}: {out.stdout}{out.stderr}"
        return out.stdout

    def stop(self) -> None:
        for task in self.run("tasks", "ls", "-q").split():
            subprocess.run(self.ctr("tasks", "kill", "-s", "SIGKILL", task), capture_output=True)
        deadline = time.monotonic() + 30
        while "RUNNING" in self.run("tasks", "ls") and time.monotonic() < deadline:
            time.sleep(0.1)  # poll: the killed tasks stop before they can be deleted
        for container in self.run("containers", "ls", "-q").split():
            subprocess.run(self.ctr("tasks", "delete", "-f", container), capture_output=True)
            subprocess.run(self.ctr("containers", "delete", container), capture_output=True)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        # Whatever is still mounted under our folder (a task's root filesystem) goes too.
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(str(self.folder))), reverse=True):
            subprocess.run(["umount", "-l", mount], check=False)


@pytest.fixture(scope="module")
def archives() -> dict[str, Path]:
    return images.archives(NAMES)


@pytest.fixture(scope="module")
def containerd(
    archives: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Containerd]:
    runtime = Containerd(tmp_path_factory.mktemp("containerd"))
    try:
        for archive in archives.values():
            runtime.run("images", "import", str(archive), timeout=300)
        yield runtime
    finally:
        runtime.stop()


def _owned_folder(base: Path, name: str, uid: int = 1000) -> Path:
    folder = base / name
    folder.mkdir()
    os.chown(folder, uid, uid)
    return folder


def _bind(source: Path, target: str) -> list[str]:
    return ["--mount", f"type=bind,src={source},dst={target},options=rbind:rw"]


def _wait_for(check, what: str, timeout: float = 60) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout} s; last: {last}")


def test_the_archives_import_under_the_refs_pods_name(containerd: Containerd, archives):
    listed = set(containerd.run("images", "ls", "-q").split())
    assert set(archives) <= listed
    assert "docker.io/library/zookeeper:3.9" in listed  # what `zookeeper:3.9` means
    assert resources.DEFAULT_BROKER_IMAGE in listed


def test_the_broker_runs_as_uid_1000_on_a_read_only_root_and_answers_readyz(
    containerd: Containerd, tmp_path: Path
):
    ref = resources.DEFAULT_BROKER_IMAGE
    assert containerd.run("run", "--rm", ref, "samsa-id", "id", "-u").strip() == "1000"
    data = _owned_folder(tmp_path, "data")
    tmp = _owned_folder(tmp_path, "tmp")
    containerd.run(
        "run", "-d", "--read-only", "--seccomp",
        *_bind(data, "/var/lib/samsa"), *_bind(tmp, "/tmp"),
        ref, "samsa-broker",
    )  # fmt: skip
    ready = (
        "import urllib.request as u; "
        "print(u.urlopen('http://127.0.0.1:9644/readyz', timeout=2).status)"
    )

    def probe() -> tuple[bool, str]:
        out = subprocess.run(
            containerd.ctr("tasks", "exec", "--exec-id", f"probe{time.monotonic_ns()}",
                           "samsa-broker", "python3", "-c", ready),
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return out.stdout.strip() == "200", out.stdout + out.stderr

    _wait_for(probe, "the broker's /readyz answered 200")
    # It wrote its data where the pod mounts its volume, and nowhere else could it.
    assert any(data.rglob("*"))
    containerd.run("tasks", "kill", "-s", "SIGTERM", "samsa-broker")
    _wait_for(
        lambda: (
            "STOPPED" in (s := containerd.run("tasks", "ls")) or "samsa-broker" not in s,
            s,
        ),
        "the broker stopped on SIGTERM",
    )


def test_zookeeper_starts_as_the_operator_runs_it_and_answers_ruok(
    containerd: Containerd, tmp_path: Path
):
    """The operator's command, environment and volumes (one replica), on a read-only root."""
    from samsa_operator.models import KafkaClusterSpec

    cluster = resources.Cluster("demo", "ns", "u", KafkaClusterSpec())
    (container,) = resources.zookeeper_statefulset(cluster)["spec"]["template"]["spec"][
        "containers"
    ]
    env = [f"{e['name']}={e['value']}" for e in container["env"]]
    # One server, and its own name for it: there is no cluster DNS in this test.
    env = [e for e in env if not e.startswith("ZOO_SERVERS=")]
    env += ["ZOO_SERVERS=server.1=localhost:2888:3888;2181", "HOSTNAME=demo-zookeeper-0"]
    mounts = [
        flag
        for m in container["volumeMounts"]
        for flag in _bind(_owned_folder(tmp_path, m["name"]), m["mountPath"])
    ]
    containerd.run(
        "run", "-d", "--read-only", "--seccomp",
        *(f for e in env for f in ("--env", e)), *mounts,
        "docker.io/library/zookeeper:3.9", "samsa-zookeeper",
        *container["command"],
    )  # fmt: skip
    ask = "exec 3<>/dev/tcp/127.0.0.1/{port}; printf '{request}' >&3; cat <&3"

    def probe(port: int, request: str, expect: str) -> tuple[bool, str]:
        out = subprocess.run(
            containerd.ctr("tasks", "exec", "--exec-id", f"probe{time.monotonic_ns()}",
                           "samsa-zookeeper", "bash", "-c",
                           ask.format(port=port, request=request)),
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return expect in out.stdout, out.stdout + out.stderr

    _wait_for(lambda: probe(2181, "ruok", "imok"), "ZooKeeper answered ruok", timeout=90)
    # The pods' readiness probe: an httpGet of /commands/ruok on the admin port. It answers
    # 200 from the start, with an error in its body until the server serves.
    answer = _wait_for(
        lambda: probe(
            resources.ZK_ADMIN_PORT, "GET /commands/ruok HTTP/1.0\\r\\n\\r\\n", '"error" : null'
        ),
        "the admin server's /commands/ruok answered without an error",
    )
    assert answer.startswith("HTTP/1.1 200 ")
    assert (tmp_path / "data" / "myid").read_text().strip() == "1"
    # zoo.cfg from the operator's ZOO_* settings, in the pod's conf volume.
    assert (
        "4lw.commands.whitelist=ruok,srvr,mntr,stat" in (tmp_path / "conf" / "zoo.cfg").read_text()
    )
    containerd.run("tasks", "kill", "-s", "SIGKILL", "samsa-zookeeper")


def test_pause_and_coredns_start(containerd: Containerd):
    out = containerd.run(
        "run", "--rm", "registry.k8s.io/coredns/coredns:v1.12.1", "samsa-coredns",
        "/coredns", "-version",
    )  # fmt: skip
    assert "CoreDNS-1.12.1" in out
    containerd.run("run", "-d", "--read-only", "registry.k8s.io/pause:3.10.1", "samsa-pause")

    def running() -> tuple[bool, str]:
        out = containerd.run("tasks", "ls")
        return "RUNNING" in out, out

    tasks = _wait_for(running, "the pause container running", timeout=30)
    assert "samsa-pause" in tasks
    containerd.run("tasks", "kill", "-s", "SIGTERM", "samsa-pause")


def test_a_second_build_builds_nothing(archives):
    started = time.monotonic()
    done = images.build(NAMES)
    assert [entry.image.name for entry, built in done if built] == []
    assert {entry.image.ref: entry.archive for entry, _ in done} == archives
    assert time.monotonic() - started < 30


def test_the_spark_images_run_as_spark_with_pyspark_samsa_spark_and_the_operator(
    containerd: Containerd, tmp_path: Path
):
    """The Spark image (its driver and executor modes are Spark's entrypoint's) and the
    spark-operator's controller image, on the Spark base: uid 185, Spark 4.2.0, the job
    package importable, the operator's binary on PATH as its chart runs it."""
    spark = images.archives(["spark", "spark-operator"])
    for archive in spark.values():
        containerd.run("images", "import", str(archive), timeout=600)
    ref = "docker.io/library/samsa-spark:0.1.0"
    assert containerd.run("run", "--rm", ref, "samsa-spark-id", "id", "-u").strip() == "185"
    # A JVM looks its host name up: a pod's /etc/hosts (the kubelet's) has it.
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost {socket.gethostname()}\n")
    out = containerd.run(
        "run", "--rm", "--read-only", *_bind(hosts, "/etc/hosts"), ref, "samsa-spark-version",
        "/opt/entrypoint.sh", "bash", "-c", "spark-submit --version 2>&1",
    )  # fmt: skip
    assert "version 4.2.0" in out
    imports = "import pyspark, samsa_spark, pyspark_samsa, pyarrow; print(pyspark.__version__)"
    out = containerd.run(
        "run", "--rm", ref, "samsa-spark-python", "/opt/entrypoint.sh", "python3", "-c", imports
    )
    assert out.strip() == "4.2.0"
    out = containerd.run(
        "run", "--rm", "ghcr.io/kubeflow/spark-operator/controller:2.5.1", "samsa-sparkop",
        "/usr/bin/spark-operator", "controller", "start", "--help",
    )  # fmt: skip
    assert "--namespaces" in out
