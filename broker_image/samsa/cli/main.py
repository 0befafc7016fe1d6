"""The samsa command line: subcommands are registered here, each in its own module."""

from __future__ import annotations

import sys

import typer

from samsa.cli.broker import broker

_app = typer.Typer(
    name="samsa",
    help="Samsa: a Kafka-compatible commit log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
_app.command("broker")(broker)


@_app.callback()
def _root() -> None:
    """Samsa: a Kafka-compatible commit log."""


_registered: list[bool] = []


def register_tools() -> typer.Typer:
    """Tools for people live in their own modules; each adds itself to the app (once)."""
    import importlib

    if _registered:
        return _app
    _registered.append(True)
    for module in (
        "samsa.cli.topics",
        "samsa.cli.groups",
        "samsa.cli.security",
        "samsa.cli.transactions",
        "samsa.cli.produce",
        "samsa.cli.consume",
        "samsa.cli.local_cluster",
        "samsa.cli.console",
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.register(_app)
    return _app


def main() -> None:
    # kio registers Hypothesis strategies for its types whenever Hypothesis is importable (a
    # development environment), which costs a process over half a second of CPU at start.
    # Here, not at import: a test process that imports the app keeps its Hypothesis.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    # `samsa broker` is what a pod runs: it starts without loading the tools for people.
    if sys.argv[1:2] != ["broker"]:
        register_tools()
    _app()


def __getattr__(name: str) -> typer.Typer:
    # `app` for whoever imports it (tests, docs) is the whole command line; `main` alone may
    # leave the tools out.
    if name == "app":
        return register_tools()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
