"""A bounds-checked reader of request bodies, for the requests read by hand on the hot path
(Produce, Fetch): every read checks the bytes present, and anything short or malformed
raises InvalidRequestError, as kio's decoding does for the rest."""

from __future__ import annotations

import struct
import uuid

from samsa.protocol.bounds import InvalidRequestError, read_uvarint

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

    def int8(self) -> int:
        self.need(1)
        (value,) = _I8.unpack_from(self.buf, self.pos)
        self.pos += 1
        return int(value)

    def int16(self) -> int:
        self.need(2)
        (value,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        self.need(4)
        (value,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def int64(self) -> int:
        self.need(8)
        (value,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

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
            for _ in range(self.uvarint()):
                self.uvarint()  # the tag
                size = self.uvarint()
                self.need(size)
                self.pos += size

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
