"""Kafka wire-format primitives shared by the hand-written encoders.

Owns the low-level building blocks (big-endian integers, unsigned varints,
legacy and compact strings/arrays, UUIDs, tagged-field sections) and the
response/request header rules: which header version an API version uses,
and the encoded response header itself.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from functools import cache

from kio.index import load_request_schema, load_response_schema

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
U32 = struct.Struct(">I")

EMPTY_TAGGED_FIELDS = b"\x00"
UUID_ZERO = bytes(16)

API_KEY_API_VERSIONS = 18

# Single-byte varints cover every small length and count; precomputing them
# keeps the hot paths free of per-call bytes() construction.
_SMALL_UVARINTS = tuple(bytes((i,)) for i in range(0x80))
_LEGACY_NULL_STRING = I16.pack(-1)
_LEGACY_NULL_ARRAY = I32.pack(-1)


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128 varint, as used for compact lengths and tags."""
    if 0 <= value < 0x80:
        return _SMALL_UVARINTS[value]
    if value < 0:
        raise ValueError(f"unsigned varint cannot encode {value}")
    # Unrolled for the sizes record batches actually have (up to 256 MiB);
    # the generic loop costs about twice as much.
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0x200000:
        return bytes((value & 0x7F | 0x80, (value >> 7) & 0x7F | 0x80, value >> 14))
    if value < 0x10000000:
        return bytes(
            (
                value & 0x7F | 0x80,
                (value >> 7) & 0x7F | 0x80,
                (value >> 14) & 0x7F | 0x80,
                value >> 21,
            )
        )
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_length(length: int | None) -> bytes:
    """Compact string/bytes/array length: N+1, with 0 meaning null."""
    if length is None:
        return _SMALL_UVARINTS[0]
    return encode_uvarint(length + 1)


def compact_string(value: str) -> bytes:
    data = value.encode()
    return encode_uvarint(len(data) + 1) + data


def compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return _SMALL_UVARINTS[0]
    return compact_string(value)


def legacy_string(value: str) -> bytes:
    data = value.encode()
    return I16.pack(len(data)) + data


def legacy_nullable_string(value: str | None) -> bytes:
    if value is None:
        return _LEGACY_NULL_STRING
    return legacy_string(value)


def legacy_array_length(length: int | None) -> bytes:
    if length is None:
        return _LEGACY_NULL_ARRAY
    return I32.pack(length)


def uuid_bytes(value: uuid.UUID | None) -> bytes:
    """Kafka has no null UUID on the wire; null is sent as all zeros."""
    if value is None:
        return UUID_ZERO
    return value.bytes


def encode_tagged_fields(fields: Iterable[tuple[int, bytes]]) -> bytes:
    """A tagged-field section from (tag, encoded value) pairs.

    The spec requires ascending tag order, so the pairs are sorted here rather
    than trusting every caller to get it right.
    """
    items = sorted(fields)
    if not items:
        return EMPTY_TAGGED_FIELDS
    parts = [encode_uvarint(len(items))]
    for tag, data in items:
        parts.append(encode_uvarint(tag))
        parts.append(encode_uvarint(len(data)))
        parts.append(data)
    return b"".join(parts)


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v1 (flexible) or v0; see `response_header_flexible`."""
    if flexible:
        return I32.pack(correlation_id) + EMPTY_TAGGED_FIELDS
    return I32.pack(correlation_id)


@cache
def response_header_flexible(api_key: int, api_version: int) -> bool:
    """Whether the response to this API version carries header v1.

    ApiVersions is pinned to header v0 at every version: a client that does not
    yet know the broker's versions must still be able to parse the reply. kio's
    generated schemas already encode that, but the rule is stated here too so a
    schema regeneration cannot silently break version negotiation.

    Raises kio's `UnknownAPIKey` / `UnknownEntity` for pairs kio does not know.
    """
    schema = load_response_schema(api_key, api_version)
    if api_key == API_KEY_API_VERSIONS:
        return False
    return bool(schema.__header_schema__.__flexible__)


@cache
def request_header_flexible(api_key: int, api_version: int) -> bool:
    """Whether requests of this API version carry header v2 (else v1).

    Raises kio's `UnknownAPIKey` / `UnknownEntity` for pairs kio does not know.
    """
    schema = load_request_schema(api_key, api_version)
    return bool(schema.__header_schema__.__flexible__)
