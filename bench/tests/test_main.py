"""`python -m bench` with no family runs everything only when asked with nothing or --quick:
--help prints the usage and a mistyped flag is a one-line error, and neither runs a benchmark."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bench import __main__ as cli


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(cli, "components", lambda argv: calls.append("components"))
    monkeypatch.setattr(cli.peers, "main", lambda argv: calls.append(" ".join(["peers", *argv])))
    return calls


@pytest.mark.parametrize(
    ("argv", "code", "stream", "says"),
    [
        (["--help"], 0, "out", "usage: python -m bench"),
        (["--qick"], 2, "err", "unrecognized arguments: --qick"),
    ],
    ids=["help prints the usage", "a mistyped flag is an error"],
)
def test_help_or_a_mistyped_flag_runs_nothing(
    argv: list[str],
    code: int,
    stream: str,
    says: str,
    ran: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == code
    assert says in getattr(capsys.readouterr(), stream)
    assert ran == []


def test_quick_runs_both_families(ran: list[str]) -> None:
    cli.main(["--quick"])
    assert ran == ["components", "peers --quick"]


def test_make_bench_runs_both_families_and_rewrites_the_docs(ran: list[str]) -> None:
    """The arguments `make bench` gives, read from the Makefile itself."""
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    recipe = makefile.split("\nbench:\n", 1)[1].splitlines()[0]
    argv = shlex.split(recipe.split("python -m bench", 1)[1])
    assert argv == ["--docs", "docs"]
    cli.main(argv)
    assert ran == ["components", "peers --docs docs"]
