"""`samsa console`: serve the web console of a Kafka cluster (samsa.console) on a local port."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer
from aiohttp import web

from samsa.cli.errors import fail
from samsa.cli.kafka import DEFAULT_BOOTSTRAP, Bootstrap, Cluster, Properties
from samsa.console.app import Settings, make_app
from samsa.console.cluster import ClusterView
from samsa.console.login import load_users


def register(app: typer.Typer) -> None:
    app.command("console")(console)


def console(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
    port: Annotated[int, typer.Option("--port", min=0, help="Port to serve on.")] = 8088,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (0.0.0.0 for every interface).")
    ] = "127.0.0.1",
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only/--read-write",
            help="Read-only (the default) hides producing and offset resets and refuses them.",
        ),
    ] = True,
    users_file: Annotated[
        Path | None,
        typer.Option(
            "--users-file",
            exists=True,
            dir_okay=False,
            help="Log in with HTTP basic auth as one of these user:password lines.",
        ),
    ] = None,
    lag_interval: Annotated[
        float, typer.Option("--lag-interval", min=0.1, help="Seconds between lag samples.")
    ] = 5.0,
) -> None:
    """Serve a web console of the cluster: brokers, topics, records, groups and their lag.

    Log in with --users-file or SAMSA_CONSOLE_PASSWORD (user SAMSA_CONSOLE_USER, default admin);
    with neither, anyone who reaches the port may use it."""
    try:
        users = load_users(users_file, os.environ)
    except ValueError as exc:
        fail(str(exc), 2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = Settings(read_only=read_only, users=users, lag_interval=lag_interval)
    app = make_app(ClusterView(Cluster(bootstrap, properties)), settings)
    mode = "read-only" if read_only else "read-write"
    login = f"{len(users)} user(s) may log in" if users else "no login"
    typer.echo(f"Samsa console ({mode}, {login}) of {bootstrap} on http://{host}:{port}/", err=True)
    web.run_app(app, host=host, port=port, print=None, access_log=None)
