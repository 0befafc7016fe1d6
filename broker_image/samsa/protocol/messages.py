"""Kafka requests and responses through kio: header parsing, version-aware building, encoding."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import struct
import types
import typing
import uuid
from functools import cache
from typing import Any

from kio.index import UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from samsa.protocol import controller_apis
from samsa.protocol.bounds import InvalidRequestError, LengthError, check_lengths, read_uvarint

_HEADER = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">hhi")


@dataclasses.dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes of the header, so the body starts here


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise InvalidRequestError("truncated tagged field")
    return pos


def parse_request_header(frame: bytes | memoryview, flexible: bool) -> RequestHeader:
    """Request header v1, or v2 (tagged fields) for flexible versions; client_id is not compact."""
    if len(frame) < _HEADER.size:
        raise InvalidRequestError("frame shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    client_id: str | None = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(frame):
            raise InvalidRequestError("truncated client id")
        try:
            client_id = bytes(frame[pos:end]).decode()
        except UnicodeDecodeError as exc:
            raise InvalidRequestError("client id is not UTF-8") from exc
        pos = end
    elif client_len != -1:
        raise InvalidRequestError("negative client id length")
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def peek_api(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without reading further."""
    if len(frame) < _PEEK.size:
        raise InvalidRequestError("frame shorter than a request header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


@cache
def request_type(api_key: int, version: int) -> Any:
    own = controller_apis.REQUESTS.get((api_key, version))
    return own if own is not None else load_request_schema(api_key, version)


@cache
def response_type(api_key: int, version: int) -> Any:
    own = controller_apis.RESPONSES.get((api_key, version))
    return own if own is not None else load_response_schema(api_key, version)


@cache
def request_is_flexible(api_key: int, version: int) -> bool:
    try:
        return bool(request_type(api_key, version).__flexible__)
    except UnknownEntity:
        # Versions kio has no schema for are the oldest ones (Produce v0-v2), never flexible.
        return False


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


def preload_request(api_key: int, version: int) -> None:
    """What reading a request of this version first needs (its schema, its reader), loaded
    and cached now; nothing for a version kio does not know."""
    request_is_flexible(api_key, version)
    with contextlib.suppress(UnknownEntity):
        _reader(request_type(api_key, version))


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def decode_request(api_key: int, version: int, frame: bytes | memoryview, offset: int) -> Any:
    """The request body as kio's dataclass; malformed bytes raise InvalidRequestError."""
    cls = request_type(api_key, version)
    if isinstance(frame, memoryview) and not frame.readonly:
        frame = frame.toreadonly()
    try:
        # kio's native reader reserves an array's declared count before reading it: a count
        # no frame could hold must be refused first (an allocation failure aborts the broker).
        check_lengths(cls, frame, offset)
        # Bytes after the body are ignored, as Kafka ignores them (librdkafka sends some).
        value, _size = _reader(cls)(frame, offset)
    except LengthError as exc:
        raise InvalidRequestError(f"cannot decode {cls.__name__}: {exc}") from exc
    except InvalidRequestError:
        raise
    except Exception as exc:  # kio raises a variety of errors on malformed input
        raise InvalidRequestError(f"cannot decode {cls.__name__}: {exc}") from exc
    return value


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """A whole request frame: size prefix, request header (v1, or v2 when flexible), body
    (a kio entity, or its bytes from a hand-written encoder)."""
    cls = request_type(api_key, version)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    raw = client_id.encode() if client_id is not None else b""
    out.write(_HEADER.pack(api_key, version, correlation_id, -1 if client_id is None else len(raw)))
    out.write(raw)
    if cls.__flexible__:
        out.write(b"\0")  # no tagged fields in the header
    if isinstance(body, bytes):
        out.write(body)
    else:
        _writer(cls)(out, body)
    frame = out.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    del frame
    return out.getvalue()


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix."""
    cls = response_type(api_key, version)
    if isinstance(frame, memoryview) and not frame.readonly:
        frame = frame.toreadonly()
    (correlation_id,) = _SIZE.unpack_from(frame, 0)
    pos = 4
    # ApiVersions answers with header v0 whatever its version, so the client can read it.
    if cls.__flexible__ and api_key != 18:
        pos = skip_tagged_fields(frame, pos)
    try:
        value, _size = _reader(cls)(frame, pos)
    except Exception as exc:
        raise InvalidRequestError(f"cannot decode {cls.__name__}: {exc}") from exc
    return correlation_id, value


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A whole frame: size prefix, response header, body."""
    cls = response_type(api_key, version)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    _writer(header_cls)(out, header_cls(correlation_id=correlation_id))
    _writer(cls)(out, body)
    frame = out.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    del frame
    return out.getvalue()


# Building kio's per-version dataclasses from plain values.

_TIMEDELTA_NAMES = ("i32Timedelta", "i64Timedelta")


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kind: str  # "plain", "timedelta", "error", "uuid", "entity", "entities", "datetime"
    target: Any = None


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _plan_for(tp: Any) -> tuple[str, Any]:
    tp = _unwrap_optional(tp)
    origin = typing.get_origin(tp)
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        kind, target = _plan_for(inner)
        if kind == "entity":
            return "entities", target
        return "plain", None
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return "entity", tp
        if issubclass(tp, ErrorCode):
            return "error", None
        if issubclass(tp, datetime.timedelta) or tp.__name__ in _TIMEDELTA_NAMES:
            return "timedelta", None
        if issubclass(tp, datetime.datetime):
            return "datetime", None
        if issubclass(tp, uuid.UUID):
            return "uuid", None
    return "plain", None


@cache
def _plans(cls: type) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        kind, target = _plan_for(hints.get(f.name, f.type))
        plans.append(_FieldPlan(f.name, kind, target))
    return tuple(plans)


def _convert(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None
    kind = plan.kind
    if kind == "plain":
        return tuple(value) if isinstance(value, list) else value
    if kind == "error":
        return value if isinstance(value, ErrorCode) else ErrorCode(int(value))
    if kind == "timedelta":
        if isinstance(value, datetime.timedelta):
            return value
        return datetime.timedelta(milliseconds=int(value))
    if kind == "uuid":
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    if kind == "datetime":
        if isinstance(value, datetime.datetime):
            return value
        return datetime.datetime.fromtimestamp(int(value) / 1000, tz=datetime.UTC)
    if kind == "entity":
        return build(plan.target, value)
    return tuple(build(plan.target, item) for item in value)


def build(cls: Any, values: Any) -> Any:
    """An instance of a kio dataclass from a mapping; keys the version lacks are dropped.

    Nested entities are given as mappings (or lists of them) and built with the nested class of
    the same version, so one handler serves every version of an API.
    """
    if dataclasses.is_dataclass(values) and not isinstance(values, type):
        return values
    kwargs = {}
    for plan in _plans(cls):
        if plan.name in values:
            kwargs[plan.name] = _convert(plan, values[plan.name])
    return cls(**kwargs)


def get(obj: Any, name: str, default: Any = None) -> Any:
    """A request field that only some versions have."""
    return getattr(obj, name, default)


def ms(value: datetime.timedelta | int | None) -> int:
    """Milliseconds of a kio timedelta field."""
    if value is None:
        return 0
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)
