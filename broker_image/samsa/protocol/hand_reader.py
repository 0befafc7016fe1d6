"""A bounds-checked reader of request bodies, for the requests read by hand on the hot path
(Produce, Fetch): every read checks the bytes present, and anything short or malformed
raises InvalidRequestError, as kio's decoding does for the rest."""

from __future__ import annotations

import struct
import uuid

from samsa.protocol.bounds import InvalidRequestError, read_uvarint
from samsa.protocol.messages import skip_tagged_fields

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Reader:
    __slots__ = ("buf", "flexible", "pos", "what")

    def __init__(self, buf: memoryview, pos: int, flexible: bool, what: str) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible
        self.what = what  # the request's name, for the error

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise InvalidRequestError(f"truncated {self.what}")

    def _fixed(self, field: struct.Struct) -> int:
        self.need(field.size)
        (value,) = field.unpack_from(self.buf, self.pos)
        self.pos += field.size
        return int(value)

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uuid(self) -> uuid.UUID:
        self.need(16)
        value = uuid.UUID(bytes=bytes(self.buf[self.pos : self.pos + 16]))
        self.pos += 16
        return value

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos)
        return value

    def length(self) -> int:
        """A string/bytes/array length; -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        return self.int32()

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        self.need(n)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return bytes(raw).decode()
        except UnicodeDecodeError:
            raise InvalidRequestError("string is not UTF-8") from None

    def records(self) -> memoryview | None:
        n = self.length()
        if n < 0:
            return None
        self.need(n)
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def count(self) -> int:
        n = self.length()
        if n < 0:
            return 0
        # Each element takes at least one byte: a larger count is a lie, refuse it early.
        self.need(n)
        return n

    def tags(self) -> None:
        """Skip a flexible version's tagged fields."""
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos)

    def tagged(self) -> dict[int, memoryview]:
        """A flexible version's tagged fields, by tag, as views of their bytes."""
        out: dict[int, memoryview] = {}
        if self.flexible:
            for _ in range(self.uvarint()):
                tag = self.uvarint()
                size = self.uvarint()
                self.need(size)
                out[tag] = self.buf[self.pos : self.pos + size]
                self.pos += size
        return out
