"""Apache Kafka itself, from the cached jars: its command-line tools against any bootstrap
server, and a real KRaft cluster (one node, or several with combined broker and controller
roles) on 127.0.0.1, the reference that Samsa is compared against.

The tools are run by their main classes, as Kafka's ``bin/*.sh`` scripts run them, so no Kafka
distribution needs unpacking. A cluster keeps its ports and pids in ``kafka.json`` in its
directory, so ``samsa-dev kafka down`` in another process finds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from samsa.local_cluster.cluster import pid_alive
from samsa.local_cluster.ports import free_port
from samsa_dev import jars
from samsa_dev.cache import cache_root

JAR_SET = "kafka"


def kafka_version() -> str:
    """The Apache Kafka release the jar cache pins."""
    return jars.pinned_version(JAR_SET, "kafka_2.13")


STATE_FILE = "kafka.json"
COMPILED = ".compiled"

# The main class behind each of Kafka's bin/ scripts (Kafka 4.3).
TOOLS: dict[str, str] = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
}

# Tools talk on stderr only when something is wrong, as Kafka's tools-log4j2 configuration does;
# the logger follows System.err, so that a tool run inside another JVM's shell is heard there.
TOOLS_LOG4J = """\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
appender.stderr.follow = true
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
"""

SERVER_LOG4J = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = info
logger.request.name = kafka.request.logger
logger.request.level = warn
"""


class UnknownTool(ValueError):
    pass


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise jars.JarsUnavailable("java is not installed (run `make setup`)")
    return found


def main_class(tool: str) -> str:
    """The main class of a tool, by its script name (``kafka-topics`` or ``kafka-topics.sh``)
    or by a fully qualified class name."""
    name = tool.removesuffix(".sh")
    if name in TOOLS:
        return TOOLS[name]
    if "." in name and name[:1].islower() and name.split(".")[-1][:1].isupper():
        return name
    raise UnknownTool(f"no Kafka tool named {tool!r}; known: {', '.join(sorted(TOOLS))}")


def _log4j_file(name: str, text: str) -> Path:
    path = cache_root() / "kafka-log4j" / name
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def java_command(
    klass: str,
    args: list[str],
    *,
    jar_sets: tuple[str, ...] = (JAR_SET,),
    heap: str = "256m",
    log4j: Path | None = None,
    jvm_options: tuple[str, ...] = (),
    classes: tuple[Path, ...] = (),
) -> list[str]:
    """A ``java`` command line running `klass` with `classes` (folders) and the jar sets on
    its classpath."""
    log4j = log4j or _log4j_file("tools-log4j2.properties", TOOLS_LOG4J)
    return [
        java(),
        f"-Xmx{heap}",
        # Short-lived tools start faster without the optimising compiler.
        *(["-XX:TieredStopAtLevel=1"] if heap == "256m" else []),
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        *jvm_options,
        "-cp",
        os.pathsep.join([*map(str, classes), jars.classpath(*jar_sets)]),
        klass,
        *args,
    ]


def compiled(source: Path, jar_sets: tuple[str, ...] = (JAR_SET,)) -> Path:
    """The classes of one Java source file, compiled by ``javac`` against the jar sets once
    and kept in ``<cache>/java/<name>-<hash of the source and the classpath>``: launching a
    source file (JEP 330) compiles it again at every start, which costs seconds of CPU."""
    source = Path(source).resolve()
    classpath = jars.classpath(*jar_sets)
    digest = hashlib.sha256(source.read_bytes() + b"\0" + classpath.encode()).hexdigest()[:16]
    target = cache_root() / "java" / f"{source.stem}-{digest}"
    if (target / COMPILED).exists():
        return target
    javac = str(Path(java()).with_name("javac"))
    if not Path(javac).exists():
        javac = shutil.which("javac") or "javac"
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    result = subprocess.run(
        [javac, "-nowarn", "-proc:none", "-cp", classpath, "-d", str(staging), str(source)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = " | ".join(result.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"javac {source.name} failed: {tail}")
    (staging / COMPILED).write_text("")
    try:
        os.replace(staging, target)
    except OSError:  # another process compiled the same source meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    # Other versions are kept (a few kilobytes each): another checkout may be running one.
    return target


def java_program(
    source: Path,
    args: list[str],
    *,
    jar_sets: tuple[str, ...] = (JAR_SET,),
    heap: str = "512m",
    jvm_options: tuple[str, ...] = (),
) -> list[str]:
    """A ``java`` command line running the class named after one Java source file (so test
    programs need no build step: it is compiled on first use) with the jar sets on its
    classpath."""
    classes = compiled(source, jar_sets)
    return java_command(
        Path(source).stem,
        list(args),
        jar_sets=jar_sets,
        heap=heap,
        jvm_options=jvm_options,
        classes=(classes,),
    )


def tool_command(tool: str, args: list[str], heap: str = "256m") -> list[str]:
    return java_command(main_class(tool), list(args), heap=heap)


def run_tool(
    tool: str,
    args: list[str],
    *,
    timeout: float = 120.0,
    input: str | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools to completion; its output is returned as text."""
    return subprocess.run(
        tool_command(tool, args),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


# -- a real Apache Kafka ----------------------------------------------------------------------


def port_open(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    pid: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class KafkaState:
    cluster_id: str
    nodes: list[KafkaNode] = field(default_factory=list)
    overrides: dict[str, str] = field(default_factory=dict)


def server_properties(node: KafkaNode, nodes: list[KafkaNode], log_dir: Path) -> dict[str, str]:
    """A combined broker and controller node of a KRaft cluster on 127.0.0.1.

    Internal topics get a replication factor the cluster can hold, as Kafka's quickstart
    configuration does for one node; everything else is Kafka's default unless overridden.
    """
    size = len(nodes)
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
    return {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "offsets.topic.replication.factor": str(min(3, size)),
        "transaction.state.log.replication.factor": str(min(3, size)),
        "transaction.state.log.min.isr": str(min(2, size)),
        "share.coordinator.state.topic.replication.factor": str(min(3, size)),
        "share.coordinator.state.topic.min.isr": str(min(2, size)),
    }


class ApacheKafka:
    """A real Apache Kafka (KRaft, combined roles) of `size` nodes in `data_dir`."""

    def __init__(
        self,
        data_dir: Path,
        size: int = 1,
        overrides: dict[str, str] | None = None,
        heap: str = "768m",
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.size = size
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.state: KafkaState | None = None
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        # The last lines of server.log of each node ``down`` had to kill: read before the data
        # directory goes, so that a caller can say why a node did not stop.
        self.killed_at_down: dict[int, list[str]] = {}

    # -- state ---------------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    def load_state(self) -> KafkaState | None:
        try:
            raw = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None
        return KafkaState(
            cluster_id=str(raw["cluster_id"]),
            nodes=[KafkaNode(**n) for n in raw.get("nodes", [])],
            overrides=dict(raw.get("overrides", {})),
        )

    def save_state(self) -> None:
        assert self.state is not None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.state), indent=1))
        os.replace(tmp, self.state_path)

    @property
    def nodes(self) -> list[KafkaNode]:
        assert self.state is not None, "the cluster has not been started"
        return self.state.nodes

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id} in this cluster")

    def node_dir(self, node_id: int) -> Path:
        return self.data_dir / f"node-{node_id}"

    # -- up and down ---------------------------------------------------------------------------

    def up(self, timeout: float = 120.0) -> ApacheKafka:
        """Start every node that is not running; return once all serve as brokers."""
        previous = self.load_state()
        if previous is None or len(previous.nodes) != self.size:
            # A cluster id is 16 bytes in URL-safe base64 without padding, as kafka-storage makes.
            import base64

            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            self.state = KafkaState(
                cluster_id, [KafkaNode(i, free_port(), free_port()) for i in range(self.size)]
            )
        else:
            self.state = previous
        self.state.overrides.update(self.overrides)
        self.save_state()
        for n in self.nodes:
            if not pid_alive(n.pid):
                self.start_node(n.node_id)
        self.wait_serving(timeout)
        return self

    def _properties(self, node: KafkaNode) -> dict[str, str]:
        assert self.state is not None
        props = server_properties(node, self.nodes, self.node_dir(node.node_id) / "data")
        props.update(self.state.overrides)
        return props

    def start_node(self, node_id: int) -> None:
        assert self.state is not None
        node = self.node(node_id)
        folder = self.node_dir(node_id)
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self._properties(node).items()))
        if not (folder / "data" / "meta.properties").exists():
            formatted = run_tool(
                "kafka-storage",
                # "--cluster-id=": an id may begin with "-", which argparse takes for an option.
                [
                    "format",
                    "--ignore-formatted",
                    f"--cluster-id={self.state.cluster_id}",
                    "-c",
                    str(config),
                ],
            )
            if formatted.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed: {formatted.stderr.strip()}")
        log4j = folder / "log4j2.properties"
        log4j.write_text(SERVER_LOG4J.format(log=folder / "server.log"))
        command = java_command(
            "kafka.Kafka",
            [str(config)],
            heap=self.heap,
            log4j=log4j,
            jvm_options=("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"),
        )
        with open(folder / "stdout.log", "ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._procs[node_id] = proc
        node.pid = proc.pid
        self.save_state()

    def wait_serving(self, timeout: float = 120.0) -> None:
        """Until every node's broker answers Metadata with the whole cluster in it."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        last = "not started"
        while time.monotonic() < deadline:
            for n in self.nodes:
                proc = self._procs.get(n.node_id)
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(
                        f"Kafka node {n.node_id} exited with status {proc.returncode}; "
                        f"see {self.node_dir(n.node_id) / 'server.log'}"
                    )
            if all(port_open(n.port) for n in self.nodes):
                try:
                    seen = {
                        n.node_id: len(
                            AdminClient({"bootstrap.servers": n.bootstrap})
                            .list_topics(timeout=5)
                            .brokers
                        )
                        for n in self.nodes
                    }
                except Exception as exc:
                    last = str(exc)
                else:
                    if all(count == self.size for count in seen.values()):
                        return
                    last = f"brokers seen per node: {seen}"
            time.sleep(0.2)
        raise TimeoutError(f"Apache Kafka did not serve within {timeout:.0f} s: {last}")

    def _signal(self, node_id: int, sig: int) -> int:
        pid = self.node(node_id).pid
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
        return pid

    def _wait_gone(self, node_id: int, pid: int, timeout: float) -> bool:
        proc = self._procs.get(node_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return True
            if proc is None and not pid_alive(pid):
                return True
            time.sleep(0.05)
        return False

    def kill_node(self, node_id: int) -> None:
        """kill -9, as a crash."""
        pid = self._signal(node_id, signal.SIGKILL)
        self._wait_gone(node_id, pid, 10)

    def stop_node(self, node_id: int, timeout: float = 30.0) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL after `timeout`."""
        pid = self._signal(node_id, signal.SIGTERM)
        if not self._wait_gone(node_id, pid, timeout):
            self.kill_node(node_id)

    def down(self, timeout: float = 30.0) -> list[int]:
        """SIGTERM every node at once (one by one, the last would wait for a quorum that has
        gone); the exit statuses of the nodes this object started and found alive, 0 for a
        clean shutdown."""
        if self.state is None:
            self.state = self.load_state()
        if self.state is None:
            return []
        live = [n for n in self.nodes if pid_alive(n.pid)]
        for n in live:
            self._signal(n.node_id, signal.SIGTERM)
        codes = []
        for n in live:
            if not self._wait_gone(n.node_id, n.pid, timeout):
                self.kill_node(n.node_id)
                log = self.node_dir(n.node_id) / "server.log"
                with contextlib.suppress(OSError):
                    self.killed_at_down[n.node_id] = log.read_text(errors="replace").splitlines()[
                        -30:
                    ]
            proc = self._procs.get(n.node_id)
            if proc is not None:
                # The JVM reports a SIGTERM that its shutdown hooks completed as 128 + 15.
                code = proc.wait()
                codes.append(0 if code == 128 + signal.SIGTERM else code)
        for n in self.nodes:
            n.pid = 0
        self.save_state()
        return codes

    def __enter__(self) -> ApacheKafka:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down(timeout=15)
