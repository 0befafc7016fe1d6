"""Typed configuration keys: parse and validate Kafka-style string properties."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1
SHORT_MAX = 2**15 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """An unknown or invalid setting; the message names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("expected true or false")


def _parse_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


_PARSERS: dict[str, Callable[[str], Any]] = {
    "short": int,
    "int": int,
    "long": int,
    "double": float,
    "boolean": _parse_bool,
    "string": str,
    "list": _parse_list,
    "password": str,
}


@dataclass(frozen=True)
class ConfigKey:
    """One property: its name, Kafka type, default, and what values it accepts."""

    name: str
    type: str
    default: Any
    doc: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    # Values accepted outside [minimum, maximum] (Kafka's gzip level: 1 to 9, or -1).
    also: tuple[int, ...] = ()
    nullable: bool = False
    read_only: bool = True  # a broker key that can't change without a restart
    sensitive: bool = False

    def parse(self, raw: Any) -> Any:
        """Turn a raw value (string or already typed) into this key's type, or raise ConfigError."""
        if raw is None or (isinstance(raw, str) and raw.strip() == "" and self.type != "string"):
            if self.nullable or self.default is None:
                return None
            raise ConfigError(self.name, "a value is required")
        try:
            if isinstance(raw, str):
                value = _PARSERS[self.type](raw.strip() if self.type != "string" else raw)
            elif self.type == "list" and isinstance(raw, Iterable):
                value = [str(v) for v in raw]
            elif self.type in ("short", "int", "long") and isinstance(raw, bool):
                raise ValueError("expected a number")
            else:
                value = _PARSERS[self.type](str(raw)) if self.type != "boolean" else bool(raw)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                self.name, f"invalid value {raw!r} ({exc or 'bad ' + self.type})"
            ) from None
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        if self.type in ("short", "int", "long", "double") and value not in self.also:
            bound = {"short": SHORT_MAX, "int": INT_MAX}.get(self.type, LONG_MAX)
            if self.minimum is not None and value < self.minimum:
                raise ConfigError(self.name, f"value {value} is below the minimum {self.minimum:g}")
            if self.maximum is not None and value > self.maximum:
                raise ConfigError(self.name, f"value {value} is above the maximum {self.maximum:g}")
            if self.type != "double" and not -bound - 1 <= value <= bound:
                raise ConfigError(self.name, f"value {value} is out of range for {self.type}")
        if self.choices is not None:
            values = value if isinstance(value, list) else [value]
            for item in values:
                if item not in self.choices:
                    allowed = ", ".join(self.choices)
                    raise ConfigError(self.name, f"invalid value {item!r}; allowed: {allowed}")

    def render(self, value: Any) -> str | None:
        """The value as Kafka's DescribeConfigs would show it."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(value)
        return str(value)


class ConfigDef:
    """A set of keys, with parsing of a whole property map."""

    def __init__(self, keys: Iterable[ConfigKey]) -> None:
        self.keys: dict[str, ConfigKey] = {key.name: key for key in keys}

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def __getitem__(self, name: str) -> ConfigKey:
        return self.keys[name]

    def parse(self, props: Mapping[str, Any], *, allow_unknown: bool = False) -> dict[str, Any]:
        """Only the given keys, parsed and validated; unknown keys raise unless allowed."""
        parsed: dict[str, Any] = {}
        for name, raw in props.items():
            key = self.keys.get(name)
            if key is None:
                if allow_unknown:
                    continue
                raise ConfigError(name, "unknown configuration key")
            parsed[name] = key.parse(raw)
        return parsed

    def defaults(self) -> dict[str, Any]:
        return {name: key.default for name, key in self.keys.items()}
