"""`python -m bench` with no family runs everything only when asked with nothing or --quick:
--help prints the usage and a mistyped flag is a one-line error, and neither runs a benchmark."""

from __future__ import annotations

import pytest

from bench import __main__ as cli


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(cli, "components", lambda argv: calls.append("components"))
    monkeypatch.setattr(cli.peers, "main", lambda argv: calls.append("peers"))
    return calls


def test_help_prints_the_usage_and_runs_nothing(
    ran: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    assert "usage: python -m bench" in capsys.readouterr().out
    assert ran == []


def test_a_mistyped_flag_is_an_error_and_runs_nothing(
    ran: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--qick"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --qick" in capsys.readouterr().err
    assert ran == []


def test_quick_runs_both_families(ran: list[str]) -> None:
    cli.main(["--quick"])
    assert ran == ["components", "peers"]
