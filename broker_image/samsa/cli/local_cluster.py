"""`samsa local up|down|status`: a real cluster (ZooKeeper and brokers) on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from samsa.broker.properties import parse_overrides
from samsa.cli.errors import fail
from samsa.local_cluster import ZooKeeperNotInstalled
from samsa.local_cluster.cluster import LocalCluster

DEFAULT_DIR = Path(".samsa/local")

DataDir = Annotated[
    Path,
    typer.Option("--data-dir", help="Where the cluster's processes keep their data and logs."),
]

local_app = typer.Typer(
    help="A local cluster: real ZooKeeper and broker processes on 127.0.0.1.",
    no_args_is_help=True,
)


@local_app.command("up")
def up(
    brokers: Annotated[int, typer.Option("--brokers", "-n", min=1, max=64)] = 3,
    data_dir: DataDir = DEFAULT_DIR,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", help="key=value broker property for every broker."),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for ready.")] = 90,
) -> None:
    """Start ZooKeeper and the brokers (or whatever of them is not running)."""
    try:
        overrides = parse_overrides(override or [])
    except ValueError as exc:
        fail(str(exc), 2)
    cluster = LocalCluster(data_dir, brokers, overrides)
    try:
        cluster.up(timeout)
    except ZooKeeperNotInstalled as exc:
        fail(str(exc))
    except (RuntimeError, TimeoutError, OSError) as exc:
        fail(f"the cluster did not start: {exc}")
    typer.echo(
        f"ZooKeeper {cluster.zookeeper_connect}; {brokers} brokers ready. Bootstrap servers:"
    )
    typer.echo(cluster.bootstrap_servers)


@local_app.command("down")
def down(data_dir: DataDir = DEFAULT_DIR) -> None:
    """Stop the brokers (each with a controlled shutdown), then ZooKeeper. Data is kept."""
    cluster = LocalCluster(data_dir)
    if cluster.load_state() is None:
        fail(f"no local cluster in {data_dir}")
    cluster.down()
    typer.echo("stopped")


@local_app.command("status")
def status(data_dir: DataDir = DEFAULT_DIR) -> None:
    """Each process of the cluster: its pid, port and state."""
    cluster = LocalCluster(data_dir)
    rows = cluster.status()
    if not rows:
        fail(f"no local cluster in {data_dir}")
    table = Table("process", "pid", "port", "state", "readiness")
    for name, pid, port, alive, ready in rows:
        table.add_row(name, str(pid or "-"), str(port), "running" if alive else "stopped", ready)
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local")
