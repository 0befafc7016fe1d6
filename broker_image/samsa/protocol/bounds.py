"""Array, string and bytes lengths of a request body checked against the bytes present, and
against the schema's nullability, before kio's native reader sees them.

kio's reader (Rust) reserves room for an array's declared element count before reading any
element, and an allocation that fails aborts the process: a 17-byte Metadata v12 request
declaring 2^33 topics brought the whole broker down.  Every element takes at least one byte
on the wire, so a count larger than the bytes left is a lie, refused here as a malformed
request (as Kafka's generated readers refuse it) without allocating anything.

A null (length -1) where the schema allows none is refused too, as Kafka's readers refuse it:
kio would hand the handlers a None where they expect a list or a string.

This walks the body as kio's schema describes it, reading only lengths and skipping
everything else; what it does not need to understand it leaves to kio.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "error_code": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# A step reads one field at pos within buf[:end] and returns the position after it.
Step = Callable[[Any, int, int], int]


class InvalidRequestError(ValueError):
    """The bytes are not a request this broker can read; the connection is closed."""


class LengthError(InvalidRequestError):
    """A declared length or count that the bytes present cannot hold."""


def read_uvarint(buf: Any, pos: int, end: int | None = None) -> tuple[int, int]:
    """An unsigned varint at pos within buf[:end]: (value, next position)."""
    if end is None:
        end = len(buf)
    value = shift = 0
    while True:
        if pos >= end:
            raise LengthError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise LengthError("varint too long")


def _need(pos: int, n: int, end: int) -> int:
    if n < 0 or pos + n > end:
        raise LengthError(f"{n} bytes declared at byte {pos}, {max(end - pos, 0)} present")
    return pos + n


def _length(buf: Any, pos: int, end: int, flexible: bool, legacy: struct.Struct) -> tuple[int, int]:
    """A length (-1 for null) in the version's encoding."""
    if flexible:
        n, pos = read_uvarint(buf, pos, end)
        return n - 1, pos
    if pos + legacy.size > end:
        raise LengthError("truncated length")
    return legacy.unpack_from(buf, pos)[0], pos + legacy.size


def _null(pos: int, nullable: bool) -> int:
    if not nullable:
        # Kafka's generated readers refuse it too ("non-nullable field was serialized as null").
        raise LengthError(f"null at byte {pos} for a field that cannot be null")
    return pos


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> Step:
    size = _FIXED.get(kafka_type)
    if size is not None:
        return lambda buf, pos, end: _need(pos, size, end)
    legacy = _I16 if kafka_type == "string" else _I32

    def sized(buf: Any, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, legacy)
        return _null(pos, nullable) if n < 0 else _need(pos, n, end)

    return sized


def _array(element: Step, flexible: bool, nullable: bool) -> Step:
    def array(buf: Any, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, _I32)
        if n < 0:
            return _null(pos, nullable)
        if n > end - pos:
            raise LengthError(f"an array of {n} elements declared, {end - pos} bytes present")
        for _ in range(n):
            pos = element(buf, pos, end)
        return pos

    return array


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(the type inside Optional, whether it was optional)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _field_step(field: dataclasses.Field[Any], tp: Any, flexible: bool, tagged: bool) -> Step:
    inner, optional = _unwrap(tp)
    # A tagged field's absence is its null: kio reads what is present without the rule.
    nullable = optional or tagged
    is_array = typing.get_origin(inner) is tuple
    element_type = typing.get_args(inner)[0] if is_array else inner
    element_type, element_optional = _unwrap(element_type)
    if dataclasses.is_dataclass(element_type):
        step: Step = entity_step(element_type)  # type: ignore[arg-type]
        if optional and not is_array and not tagged:
            step = _nullable_entity(step)
    else:
        kafka_type = field.metadata["kafka_type"]
        step = _primitive(kafka_type, flexible, element_optional or (nullable and not is_array))
    return _array(step, flexible, nullable) if is_array else step


def _nullable_entity(step: Step) -> Step:
    # KIP-893: a nullable struct is preceded by an int8 marker, -1 for null.
    def nullable(buf: Any, pos: int, end: int) -> int:
        if pos >= end:
            raise LengthError("truncated struct marker")
        marker = buf[pos]
        return pos + 1 if marker == 0xFF else step(buf, pos + 1, end)

    return nullable


@cache
def entity_step(cls: type) -> Step:
    """The step that checks one whole entity of kio's dataclass `cls`."""
    flexible = bool(getattr(cls, "__flexible__", False))
    hints = typing.get_type_hints(cls)
    # Runs of fixed-size fields are one skip each (an int): most of an entity's fields.
    steps: list[Step | int] = []
    tags: dict[int, Step] = {}
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            tags[int(tag)] = _field_step(field, hints[field.name], flexible, True)
            continue
        size = _FIXED.get(field.metadata.get("kafka_type", ""))
        if size is not None and typing.get_origin(_unwrap(hints[field.name])[0]) is not tuple:
            if steps and isinstance(steps[-1], int):
                steps[-1] += size
            else:
                steps.append(size)
        else:
            steps.append(_field_step(field, hints[field.name], flexible, False))

    def entity(buf: Any, pos: int, end: int) -> int:
        for step in steps:
            if step.__class__ is int:
                pos += step
                if pos > end:
                    raise LengthError("truncated fixed-size fields")
            else:
                pos = step(buf, pos, end)  # type: ignore[operator]
        if flexible:
            count, pos = read_uvarint(buf, pos, end)
            if count > end - pos:
                raise LengthError(f"{count} tagged fields declared, {end - pos} bytes present")
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos, end)
                size, pos = read_uvarint(buf, pos, end)
                stop = _need(pos, size, end)
                known = tags.get(tag)
                if known is not None:
                    known(buf, pos, stop)
                pos = stop
        return pos

    return entity


def check_lengths(cls: type, buf: bytes | memoryview, offset: int) -> None:
    """Raise LengthError if the body of `cls` at `offset` declares more than `buf` holds."""
    entity_step(cls)(buf, offset, len(buf))
