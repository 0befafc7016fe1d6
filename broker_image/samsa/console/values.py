"""How the console shows a record's key, value and headers: pretty-printed JSON when the bytes
parse as JSON, else UTF-8 text, else the bytes escaped (as Python writes them). Pure."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Rendered:
    """Bytes as text for a page, and what kind of rendering it is: json, text, binary or null."""

    kind: str
    text: str


def render(data: bytes | None) -> Rendered:
    if data is None:
        return Rendered("null", "")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Rendered("binary", escape_bytes(data))
    # Only objects and arrays are worth pretty-printing: "42" as JSON is still just 42.
    if text.lstrip().startswith(("{", "[")):
        try:
            return Rendered("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except ValueError:
            pass
    if any(not ch.isprintable() and ch not in "\n\t\r" for ch in text):
        return Rendered("binary", escape_bytes(data))
    return Rendered("text", text)


def escape_bytes(data: bytes) -> str:
    """Bytes as Python's escaped literal body, so a binary value is readable and unambiguous."""
    return repr(data)[2:-1]


def render_headers(headers: list[tuple[str, bytes | None]] | None) -> list[tuple[str, str]]:
    return [(name, render(value).text) for name, value in headers or ()]


def format_timestamp(epoch_ms: int | None) -> str:
    """A record timestamp in UTC, ISO-8601 to the millisecond ("" when the record has none)."""
    if epoch_ms is None or epoch_ms < 0:
        return ""
    when = datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC)
    return when.isoformat(timespec="milliseconds")
