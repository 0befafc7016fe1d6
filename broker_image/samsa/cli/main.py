"""The samsa command line: subcommands are registered here, each in its own module."""

from __future__ import annotations

import typer

from samsa.cli.broker import broker

app = typer.Typer(
    name="samsa",
    help="Samsa: a Kafka-compatible commit log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("broker")(broker)


@app.callback()
def _root() -> None:
    """Samsa: a Kafka-compatible commit log."""


def _register_tools() -> None:
    """Tools for people live in their own modules; each adds itself to the app."""
    import importlib

    for module in (
        "samsa.cli.topics",
        "samsa.cli.groups",
        "samsa.cli.produce",
        "samsa.cli.consume",
        "samsa.cli.local",
        "samsa.cli.dev",
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.register(app)


_register_tools()


def main() -> None:
    app()
