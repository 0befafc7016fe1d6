"""The pure part of `samsa groups reset-offsets`: targets, topic specs and the plan."""

from __future__ import annotations

import datetime

import pytest

from samsa.cli.offset_reset import (
    ResetTarget,
    choose_target,
    lag,
    parse_datetime,
    parse_topic,
    plan_reset,
)

TP = ("t", 0)


def test_lag_is_unknown_without_a_commit_and_never_negative() -> None:
    assert lag(None, 10) is None
    assert lag(4, None) is None
    assert lag(4, 10) == 6
    assert lag(12, 10) == 0  # a commit past the end of a truncated log


def test_topic_specs() -> None:
    assert parse_topic("clicks") == ("clicks", None)
    assert parse_topic("clicks:2,0,2") == ("clicks", [0, 2])
    for bad in ("", ":1", "clicks:", "clicks:a", "clicks:-1"):
        with pytest.raises(ValueError):
            parse_topic(bad)


def test_datetimes_with_and_without_a_zone() -> None:
    assert parse_datetime("1970-01-01T00:00:01Z") == 1000
    assert parse_datetime("1970-01-01T01:00:01+01:00") == 1000
    local = datetime.datetime(2024, 5, 1, 12, 0).astimezone()
    assert parse_datetime("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_datetime("last tuesday")


def test_exactly_one_target() -> None:
    assert choose_target(True, False, None, None) == ResetTarget("earliest")
    assert choose_target(False, False, None, 5) == ResetTarget("offset", 5)
    with pytest.raises(ValueError, match="say where"):
        choose_target(False, False, None, None)
    with pytest.raises(ValueError, match="only one"):
        choose_target(True, True, None, None)
    with pytest.raises(ValueError, match="0 or more"):
        choose_target(False, False, None, -1)


@pytest.mark.parametrize(
    ("target", "by_time", "new", "note"),
    [
        (ResetTarget("earliest"), None, 100, ""),
        (ResetTarget("latest"), None, 200, ""),
        (ResetTarget("offset", 150), None, 150, ""),
        (ResetTarget("offset", 5), None, 100, "5 is before the log start"),
        (ResetTarget("offset", 500), None, 200, "500 is past the log end"),
        (ResetTarget("datetime", 0), {TP: 170}, 170, ""),
        (ResetTarget("datetime", 0), {TP: -1}, 200, "no record that late: the log end"),
    ],
)
def test_plan(target: ResetTarget, by_time: dict | None, new: int, note: str) -> None:
    (row,) = plan_reset([TP], target, {TP: 120}, {TP: 100}, {TP: 200}, by_time)
    assert (row.current, row.new, row.note) == (120, new, note)
