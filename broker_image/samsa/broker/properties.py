"""Reading Kafka-style .properties files and key=value overrides."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from samsa.config import ConfigError


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Java .properties, the subset people write: key=value or key: value, # and ! comments."""
    props: dict[str, str] = {}
    pending = ""
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(
                line.split()[0] if line.split() else f"line {lineno}",
                f"{source} line {lineno}: expected key=value",
            )
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def load_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("--config", f"cannot read {path}: {exc.strerror}") from None
    return parse_properties(text, str(path))


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(item, "an override must look like key=value")
        props[key.strip()] = value.strip()
    return props


def parse_listener(text: str) -> tuple[str, str, int]:
    """'PLAINTEXT://host:port' or 'host:port' -> (name, host, port)."""
    name = "PLAINTEXT"
    rest = text.strip()
    if "://" in rest:
        name, rest = rest.split("://", 1)
    host, sep, port = rest.rpartition(":")
    if not sep:
        raise ValueError(f"{text!r} is not host:port")
    host = host.strip("[]") or "0.0.0.0"
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"{text!r} has no valid port") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"{text!r} has no valid port")
    return name, host, number
