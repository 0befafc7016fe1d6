"""`samsa broker`: run one broker in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from samsa.broker.properties import load_properties, parse_listener, parse_overrides
from samsa.cli.errors import fail
from samsa.config import ConfigError, KafkaConfig

if TYPE_CHECKING:
    from samsa.broker import KafkaServer


def build_config(
    listen: str | None, config_file: Path | None, overrides: list[str], http: str | None = None
) -> KafkaConfig:
    props: dict[str, str] = {}
    if config_file is not None:
        props.update(load_properties(config_file))
    overridden = parse_overrides(overrides)
    props.update(overridden)
    if listen:
        try:
            parse_listener(listen)
        except ValueError as exc:
            raise ConfigError("--listen", str(exc)) from None
        if "listeners" in props:
            # One would silently replace the other (and advertised.listeners then names a
            # listener that is not bound): the listeners are named one way.
            where = "by --override" if "listeners" in overridden else f"in {config_file}"
            raise ConfigError("--listen", f"listeners is also set ({where}); give one or the other")
        props["listeners"] = listen if "://" in listen else f"PLAINTEXT://{listen}"
    if http:
        props["http.listener"] = http
    return KafkaConfig(props)


def broker(
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Where the logs live.")],
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen", help="host:port for Kafka clients (instead of the listeners property)."
        ),
    ] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="A server.properties file.")
    ] = None,
    override: Annotated[
        list[str] | None, typer.Option("--override", help="key=value, Kafka property names.")
    ] = None,
    http: Annotated[
        str | None, typer.Option("--http", help="host:port for /healthz, /readyz, /metrics.")
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
) -> None:
    """Start a broker: standalone (its metadata on its own disk), or a cluster member when
    zookeeper.connect is set."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = build_config(listen, config_file, override or [], http)
    except ConfigError as exc:
        fail(f"invalid configuration: {exc}", 2)
    from samsa.broker import KafkaServer  # the whole broker: loaded by this command alone

    try:
        asyncio.run(_run(KafkaServer(config, data_dir)))
    except OSError as exc:
        fail(f"cannot start the broker: {exc}")
    except ValueError as exc:
        fail(f"cannot start the broker: {exc}")


async def _run(server: KafkaServer) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    await stop.wait()
    await server.stop()
