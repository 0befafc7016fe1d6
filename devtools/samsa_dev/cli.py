"""`samsa-dev ...` (or `python -m samsa_dev`): tools for the people who develop and test Samsa,
never shipped with the broker.

- ``samsa-dev jars [SET ...]`` fetches the pinned jar sets from Maven Central into the cache;
- ``samsa-dev programs`` builds the client matrix's Go programs and installs its Node ones;
- ``samsa-dev kafka tool NAME ARGS...`` runs one of Apache Kafka's own tools (kafka-topics,
  kafka-console-producer, ...) against any bootstrap server;
- ``samsa-dev kafka up|down|status`` runs a real Apache Kafka on 127.0.0.1, the reference;
- ``samsa-dev connect`` runs a Kafka Connect worker (distributed mode) against any brokers.
- ``samsa-dev k8s build`` builds the Kubernetes control plane from the Go module proxy, and
  ``samsa-dev k8s up|down|status`` runs it on 127.0.0.1, with 3 Nodes whose pods run as local
  processes, or with ``--nodes real`` 3 real nodes (kubelet, containerd, kube-proxy) whose
  pods run in containers.
- ``samsa-dev images build [NAME ...]`` builds the images pods run (buildah, from Debian's
  packages and the repository's Dockerfiles) into the cache, and ``samsa-dev images list``
  shows each with its ref, cache key and state.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from samsa.broker.properties import parse_overrides
from samsa.cli.errors import fail
from samsa_dev import jars, programs
from samsa_dev.connect import ConnectWorker
from samsa_dev.kafka import TOOLS, ApacheKafka, UnknownTool, pid_alive, port_open, tool_command

DEFAULT_KAFKA_DIR = Path(".samsa/kafka")

dev_app = typer.Typer(
    name="samsa-dev",
    help="Developer tools: Apache Kafka and its tools, jars, the client matrix's programs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
kafka_app = typer.Typer(
    help="Apache Kafka itself: its tools, and a real cluster on 127.0.0.1.", no_args_is_help=True
)
dev_app.add_typer(kafka_app, name="kafka")
k8s_app = typer.Typer(
    help="A real Kubernetes control plane on 127.0.0.1, built from source.", no_args_is_help=True
)
dev_app.add_typer(k8s_app, name="k8s")
images_app = typer.Typer(
    help="The images pods run, built here with buildah and cached by their inputs.",
    no_args_is_help=True,
)
dev_app.add_typer(images_app, name="images")
DEFAULT_K8S_DIR = Path(".samsa/k8s")
K8sDir = Annotated[
    Path, typer.Option("--data-dir", help="Where the control plane keeps its data and logs.")
]

KafkaDir = Annotated[
    Path, typer.Option("--data-dir", help="Where the Kafka cluster keeps its data and logs.")
]


@dev_app.command("jars")
def fetch_jars(
    names: Annotated[list[str] | None, typer.Argument(help="Jar sets (all by default).")] = None,
) -> None:
    """Fetch pinned jars from Maven Central into the cache; cached sets are not fetched again."""
    for name in names or jars.sets():
        already = jars.is_fetched(name) if name in jars.sets() else False
        try:
            where = jars.fetch(name)
        except jars.JarsUnavailable as exc:
            fail(str(exc))
        typer.echo(f"{name}: {'cached' if already else 'fetched'} in {where}")


@dev_app.command("programs")
def make_programs(
    root: Annotated[
        Path, typer.Option("--dir", help="Folder of the programs, one a subfolder.")
    ] = Path("tests/clients"),
) -> None:
    """Build the Go programs (franz-go) and install the Node ones (kafkajs) of the client
    matrix, through the Go module proxy and npm; what is already made is left as it is."""
    if not root.is_dir():
        fail(f"no folder {root} (run this from the checkout)", 2)
    try:
        done = programs.prepare(root)
    except programs.ProgramUnavailable as exc:
        fail(str(exc))
    for folder, what in done:
        typer.echo(f"{folder.name}: {what}")


@kafka_app.command(
    "tool",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def kafka_tool(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help=f"One of: {', '.join(sorted(TOOLS))}.")],
) -> None:
    """Run one of Kafka's tools; the arguments after its name are its own."""
    try:
        command = tool_command(name, list(ctx.args))
    except (UnknownTool, jars.JarsUnavailable) as exc:
        fail(str(exc), 2)
    try:
        code = subprocess.call(command)
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


@kafka_app.command("up")
def kafka_up(
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=1, max=9)] = 1,
    data_dir: KafkaDir = DEFAULT_KAFKA_DIR,
    override: Annotated[
        list[str] | None, typer.Option("--override", help="key=value server property.")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait.")] = 120,
) -> None:
    """Start a real Apache Kafka (KRaft) on 127.0.0.1 and print its bootstrap servers."""
    try:
        overrides = parse_overrides(override or [])
    except ValueError as exc:
        fail(str(exc), 2)
    cluster = ApacheKafka(data_dir, nodes, overrides)
    try:
        cluster.up(timeout)
    except (jars.JarsUnavailable, RuntimeError, TimeoutError, OSError) as exc:
        fail(f"Apache Kafka did not start: {exc}")
    typer.echo(f"Apache Kafka, {nodes} node(s) ready. Bootstrap servers:")
    typer.echo(cluster.bootstrap_servers)


@kafka_app.command("down")
def kafka_down(data_dir: KafkaDir = DEFAULT_KAFKA_DIR) -> None:
    """Stop every node (controlled shutdown). Data is kept."""
    cluster = ApacheKafka(data_dir)
    if cluster.load_state() is None:
        fail(f"no Apache Kafka in {data_dir}")
    cluster.down()
    typer.echo("stopped")


@kafka_app.command("status")
def kafka_status(data_dir: KafkaDir = DEFAULT_KAFKA_DIR) -> None:
    """Each node: pid, port, and whether it is running and listening."""
    state = ApacheKafka(data_dir).load_state()
    if state is None:
        fail(f"no Apache Kafka in {data_dir}")
    for n in state.nodes:
        alive = pid_alive(n.pid)
        listening = alive and port_open(n.port)
        word = "serving" if listening else ("starting" if alive else "stopped")
        sys.stdout.write(f"node {n.node_id}\tpid {n.pid or '-'}\t{n.bootstrap}\t{word}\n")


@dev_app.command("connect")
def connect_worker(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", "-b", help="Brokers to connect to.")
    ] = "127.0.0.1:9092",
    group: Annotated[
        str,
        typer.Option("--group", help="The Connect cluster's group.id; names its three topics."),
    ] = "connect-cluster",
    port: Annotated[int, typer.Option("--port", help="REST API port on 127.0.0.1.")] = 8083,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where the worker's properties and log go.")
    ] = Path(".samsa/connect"),
    override: Annotated[
        list[str] | None, typer.Option("--override", help="key=value worker property.")
    ] = None,
) -> None:
    """Run a Kafka Connect worker in distributed mode in the foreground, with the FileStream
    connectors and JSON converters; its log is connect.log in the data directory."""
    try:
        overrides = parse_overrides(override or [])
    except ValueError as exc:
        fail(str(exc), 2)
    worker = ConnectWorker(data_dir, bootstrap_server, group, port, overrides, heap="1g")
    try:
        command = worker.command()
    except jars.JarsUnavailable as exc:
        fail(str(exc), 2)
    typer.echo(f"Kafka Connect REST API on {worker.url}; log in {worker.log}")
    try:
        code = subprocess.call(command)
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


@k8s_app.command("build")
def k8s_build() -> None:
    """Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and the real nodes'
    kubelet and kube-proxy (pinned) through the Go module proxy into the cache; a second run
    builds nothing."""
    from samsa_dev.kube import build

    try:
        done = build.build()
    except programs.ProgramUnavailable as exc:
        fail(str(exc))
    for module, folder, built in done:
        typer.echo(f"{module.name} {module.version}: {'built' if built else 'cached'} in {folder}")


@k8s_app.command("up")
def k8s_up(
    data_dir: K8sDir = DEFAULT_K8S_DIR,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait.")] = 180,
    nodes: Annotated[
        str,
        typer.Option(
            "--nodes",
            help="agent: Nodes whose pods run as local processes; real: kubelets, containerd "
            "and kube-proxy in network namespaces, pods in containers (root).",
        ),
    ] = "agent",
    count: Annotated[int, typer.Option("--count", help="How many real nodes.")] = 3,
) -> None:
    """Start etcd, the API server, the controllers, the scheduler and 3 Nodes whose pods run
    as local processes, or real nodes; print the kubeconfig's path."""
    from samsa_dev.kube.control_plane import ControlPlane

    if nodes not in ("agent", "real"):
        fail(f"--nodes is agent or real, not {nodes}", 2)
    real = count if nodes == "real" else 0
    try:
        plane = ControlPlane(data_dir).up(timeout, pods=True, real_nodes=real)
    except (programs.ProgramUnavailable, RuntimeError, TimeoutError, OSError) as exc:
        fail(f"the control plane did not start: {exc}")
    typer.echo(f"Kubernetes is up at {plane.server}. For kubectl and helm:")
    typer.echo(f"export KUBECONFIG={plane.kubeconfig}")


@k8s_app.command("down")
def k8s_down(data_dir: K8sDir = DEFAULT_K8S_DIR) -> None:
    """Stop every process of the control plane and remove the real nodes (`up` starts a new
    cluster)."""
    from samsa_dev.kube.control_plane import ControlPlane

    plane = ControlPlane(data_dir)
    if not plane.state.pids and not (plane.folder / "nodes").exists():
        fail(f"no control plane running in {data_dir}")
    plane.down()
    typer.echo("stopped")


@k8s_app.command("status")
def k8s_status(data_dir: K8sDir = DEFAULT_K8S_DIR) -> None:
    """Each process (the real nodes' too): pid and whether it runs."""
    from samsa_dev.kube.control_plane import ControlPlane
    from samsa_dev.kube.realnodes import RealNodes

    plane = ControlPlane(data_dir)
    if not plane.state.pids:
        fail(f"no control plane running in {data_dir}")
    nodes = RealNodes(plane)
    for pids, running in ((plane.state.pids, plane.running()), (nodes.state.pids, nodes.running())):
        for name, alive in running.items():
            word = "running" if alive else "stopped"
            sys.stdout.write(f"{name}\tpid {pids[name]}\t{word}\n")


@images_app.command("build")
def images_build(
    names: Annotated[list[str] | None, typer.Argument(help="Images (all by default).")] = None,
) -> None:
    """Build the images (and the bases they need) that the cache lacks, each exported once as
    an OCI archive; a second run builds nothing."""
    from samsa_dev import images

    try:
        done = images.build(names)
    except (KeyError, images.ImageBuildFailed) as exc:
        fail(str(exc))
    for entry, built in done:
        typer.echo(f"{entry.image.name}\t{entry.image.ref}\t{'built' if built else 'cached'}")


@images_app.command("list")
def images_list() -> None:
    """Each image: name, ref, cache key, and, if built for the current inputs, its size and
    archive (an OCI archive for `ctr images import` or `kind load image-archive`)."""
    from samsa_dev import images

    try:
        entries = images.entries()
    except images.ImageBuildFailed as exc:
        fail(str(exc))
    for name, entry in entries.items():
        record = entry.record()
        state = f"{record.get('size')}\t{entry.archive}" if record else "not built"
        typer.echo(f"{name}\t{entry.image.ref}\t{entry.key[:16]}\t{state}")


def main() -> None:
    dev_app()
