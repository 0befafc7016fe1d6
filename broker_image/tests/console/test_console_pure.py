"""The console's pure parts: how values are shown, how form input is read, how lag is sampled,
and who may log in."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from samsa.cli.offset_reset import ResetTarget, parse_datetime
from samsa.console import forms
from samsa.console.lag_history import LagHistory, chart_points
from samsa.console.login import authorized, load_users, parse_users
from samsa.console.values import escape_bytes, format_timestamp, render, render_headers

# -- values -----------------------------------------------------------------------------------


def test_a_json_object_is_pretty_printed() -> None:
    shown = render(b'{"user":"ana","n":[1,2]}')
    assert shown.kind == "json"
    assert shown.text == '{\n  "user": "ana",\n  "n": [\n    1,\n    2\n  ]\n}'


def test_json_keeps_non_ascii_text() -> None:
    assert render('{"city":"Zürich"}'.encode()).text == '{\n  "city": "Zürich"\n}'


def test_text_that_only_looks_like_json_is_text() -> None:
    assert render(b"{not json").kind == "text"
    assert render(b"42").kind == "text"


def test_utf8_text_is_shown_as_it_is() -> None:
    shown = render("héllo\nworld".encode())
    assert (shown.kind, shown.text) == ("text", "héllo\nworld")


def test_binary_is_escaped() -> None:
    shown = render(b"\x00\x01\xffab")
    assert (shown.kind, shown.text) == ("binary", "\\x00\\x01\\xffab")


def test_control_characters_in_valid_utf8_are_escaped_too() -> None:
    assert render(b"a\x00b").kind == "binary"
    assert escape_bytes(b"a\x00b") == "a\\x00b"


def test_a_null_value_renders_as_null() -> None:
    assert render(None).kind == "null"


def test_headers_are_rendered_in_order_with_repeats() -> None:
    assert render_headers([("a", b"1"), ("b", None), ("a", b"\xff")]) == [
        ("a", "1"),
        ("b", ""),
        ("a", "\\xff"),
    ]


def test_timestamps_are_utc_to_the_millisecond() -> None:
    assert format_timestamp(1714564800123) == "2024-05-01T12:00:00.123+00:00"
    assert format_timestamp(-1) == ""
    assert format_timestamp(None) == ""


# -- forms ------------------------------------------------------------------------------------


def test_whole_numbers_are_read_and_bad_ones_refused() -> None:
    assert forms.whole_number({"offset": " 12 "}, "offset") == 12
    assert forms.whole_number({}, "offset", 3) == 3
    with pytest.raises(forms.InputError, match="offset must be a whole number, got 'abc'"):
        forms.whole_number({"offset": "abc"}, "offset")
    with pytest.raises(forms.InputError, match="offset must be 0 or more"):
        forms.whole_number({"offset": "-1"}, "offset")


def test_page_size_is_bounded() -> None:
    assert forms.page_size({}) == 20
    with pytest.raises(forms.InputError, match="limit must be from 1 to 500"):
        forms.page_size({"limit": "0"})
    with pytest.raises(forms.InputError, match="limit must be from 1 to 500"):
        forms.page_size({"limit": "501"})


def test_timestamps_are_epoch_millis_or_iso_in_utc_by_default() -> None:
    assert forms.timestamp("1714564800000") == 1714564800000
    assert forms.timestamp("2024-05-01T12:00") == 1714564800000
    assert forms.timestamp("2024-05-01T12:00:00Z") == 1714564800000
    assert forms.timestamp("2024-05-01T14:00:00+02:00") == 1714564800000
    with pytest.raises(forms.InputError, match="not an ISO-8601 date and time"):
        forms.timestamp("yesterday")


def test_headers_are_name_value_lines() -> None:
    assert forms.headers("trace=abc\n\nsource = web=1\ntrace=def") == [
        ("trace", b"abc"),
        ("source", b" web=1"),
        ("trace", b"def"),
    ]
    with pytest.raises(forms.InputError, match="a header is name=value"):
        forms.headers("no-equals-sign")


def test_reset_targets() -> None:
    assert forms.reset_target({"to": "earliest"}) == ResetTarget("earliest")
    assert forms.reset_target({"to": "latest", "value": ""}) == ResetTarget("latest")
    assert forms.reset_target({"to": "offset", "value": "7"}) == ResetTarget("offset", 7)
    assert forms.reset_target({"to": "timestamp", "value": "2024-05-01T12:00:00Z"}) == (
        ResetTarget("datetime", parse_datetime("2024-05-01T12:00:00+00:00"))
    )
    with pytest.raises(forms.InputError, match="give the offset to reset to"):
        forms.reset_target({"to": "offset"})
    with pytest.raises(forms.InputError, match="value must be a whole number"):
        forms.reset_target({"to": "offset", "value": "seven"})
    with pytest.raises(forms.InputError, match="earliest, latest, offset or timestamp"):
        forms.reset_target({"to": "sideways"})


# -- lag history ------------------------------------------------------------------------------


def test_each_round_adds_a_sample_with_the_total_of_the_known_lags() -> None:
    history = LagHistory()
    history.record(100.0, {"g": {("t", 0): 3, ("t", 1): 4, ("u", 0): None}})
    history.record(105.0, {"g": {("t", 0): 0, ("t", 1): 1}})
    samples = history.samples("g")
    assert [(s.at, s.total) for s in samples] == [(100.0, 7), (105.0, 1)]
    assert samples[0].partitions == {("t", 0): 3, ("t", 1): 4}
    assert history.as_json("g")[1] == {
        "at": 105.0,
        "total": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 0},
            {"topic": "t", "partition": 1, "lag": 1},
        ],
    }


def test_the_window_keeps_the_latest_samples() -> None:
    history = LagHistory(keep=3)
    for i in range(5):
        history.record(float(i), {"g": {("t", 0): i}})
    assert [s.total for s in history.samples("g")] == [2, 3, 4]


def test_a_group_gone_for_a_whole_window_is_forgotten() -> None:
    history = LagHistory(keep=2)
    history.record(0.0, {"g": {("t", 0): 1}})
    history.record(1.0, {})
    assert history.samples("g")  # still within the window
    history.record(2.0, {})
    assert history.samples("g") == []
    assert history.samples("never") == []


def test_the_chart_spans_the_window_and_scales_to_the_highest_lag() -> None:
    history = LagHistory()
    for at, lag in ((10.0, 0), (15.0, 50), (20.0, 100)):
        history.record(at, {"g": {("t", 0): lag}})
    points, top = chart_points(history.samples("g"), width=200, height=100)
    assert top == 100
    assert points == [(0.0, 100.0), (100.0, 50.0), (200.0, 0.0)]
    assert chart_points([], 200, 100) == ([], 0)


# -- login ------------------------------------------------------------------------------------


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_users_file_and_environment(tmp_path: Path) -> None:
    users_file = tmp_path / "users"
    users_file.write_text("# who may log in\nana:s3cret:with-colon\n\nbo:pw\n")
    assert load_users(users_file, {}) == {"ana": "s3cret:with-colon", "bo": "pw"}
    assert load_users(None, {"SAMSA_CONSOLE_PASSWORD": "pw"}) == {"admin": "pw"}
    assert load_users(None, {"SAMSA_CONSOLE_PASSWORD": "pw", "SAMSA_CONSOLE_USER": "ops"}) == {
        "ops": "pw"
    }
    assert load_users(None, {}) == {}
    with pytest.raises(ValueError, match="line 1: expected user:password"):
        parse_users("nopassword\n", "users")


def test_basic_auth() -> None:
    users = {"ana": "s3cret"}
    assert authorized(_basic("ana", "s3cret"), users)
    assert not authorized(_basic("ana", "wrong"), users)
    assert not authorized(_basic("eve", "s3cret"), users)
    assert not authorized(None, users)
    assert not authorized("Basic !!!", users)
    assert authorized(None, {})  # no users: no login
