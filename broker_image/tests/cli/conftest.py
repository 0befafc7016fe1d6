"""Fixtures of the command-line tests: one broker per module, the CLI run in-process."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from click.testing import Result
from kafka_support import wait_until
from typer.testing import CliRunner

from samsa.cli.main import register_tools
from samsa.testing import InProcessBroker

__all__ = ["wait_until"]  # conftest modules share one name: keep the parent's helper importable

Run = Callable[..., Result]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    config = {"group.initial.rebalance.delay.ms": "0"}
    with InProcessBroker(tmp_path_factory.mktemp("samsa"), config) as b:
        yield b


@pytest.fixture
def samsa(broker: InProcessBroker) -> Run:
    """``samsa(*args)``: run the command line against the broker; the click Result."""
    runner = CliRunner()

    def run(*args: str, bootstrap: str | None = None) -> Result:
        app = register_tools()
        result = runner.invoke(app, [*args, "-b", bootstrap or broker.bootstrap_servers])
        # A crash is never an answer: typer.Exit and usage errors end as SystemExit.
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result

    return run
