"""Form and query input of the console, parsed and checked: a bad value is an `InputError`
whose message the error page shows (status 400). Pure."""

from __future__ import annotations

from collections.abc import Mapping

from samsa.cli.offset_reset import ResetTarget, parse_datetime

MAX_PAGE = 500


class InputError(ValueError):
    """Input a person gave that cannot be right."""


def whole_number(form: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    """A field that must be a number from 0; empty or absent gives `default`."""
    text = form.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{name} must be a whole number, got {text!r}") from None
    if value < 0:
        raise InputError(f"{name} must be 0 or more, got {value}")
    return value


def page_size(form: Mapping[str, str], default: int = 20) -> int:
    size = whole_number(form, "limit", default)
    assert size is not None
    if not 1 <= size <= MAX_PAGE:
        raise InputError(f"limit must be from 1 to {MAX_PAGE}, got {size}")
    return size


def timestamp(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 date and time (UTC when no zone is given)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text and "+" not in text[10:] and not text.endswith("Z") and "-" not in text[10:]:
        text += "+00:00"  # a browser's datetime-local field has no zone: the console shows UTC
    try:
        return parse_datetime(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(str(exc)) from None


def headers(text: str) -> list[tuple[str, str | bytes | None]]:
    """One `name=value` header a line (blank lines ignored), in order; names may repeat."""
    out: list[tuple[str, str | bytes | None]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise InputError(f"a header is name=value, one a line; got {line!r}")
        out.append((name.strip(), value.encode()))
    return out


def reset_target(form: Mapping[str, str]) -> ResetTarget:
    """The reset form: `to` is earliest, latest, offset or timestamp, with `value` for the last
    two."""
    to = form.get("to", "")
    value = form.get("value", "").strip()
    if to in ("offset", "timestamp") and not value:
        raise InputError(f"give the {to} to reset to")
    if to == "timestamp":
        return ResetTarget("datetime", timestamp(value))
    if to == "offset":
        return ResetTarget("offset", whole_number(form, "value"))
    if to in ("earliest", "latest"):
        return ResetTarget(to)
    raise InputError(f"reset to earliest, latest, offset or timestamp, not {to!r}")
