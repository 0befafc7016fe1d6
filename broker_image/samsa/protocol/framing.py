"""FrameReader: size-prefixed Kafka frames cut out of a byte stream, for a BufferedProtocol.

The socket is read straight into the reader's buffer (``get_buffer``/``buffer_updated``), so a
frame is copied once in Python at most: a small one out of the shared buffer, and a large one
not at all, since the rest of it is read into a buffer of its own that becomes the frame.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
_INITIAL = 64 * 1024


class FrameSizeError(ValueError):
    """A size prefix outside 1..max_size: the stream is broken, not a frame."""


class FrameReader:
    __slots__ = ("_big", "_big_got", "_buf", "_end", "_start", "_view", "max_size", "own_above")

    def __init__(self, max_size: int, own_above: int = _INITIAL // 2) -> None:
        self.max_size = max_size
        # Frames at least this large that are not whole in the buffer get a buffer of their own.
        self.own_above = own_above
        self._buf = bytearray(_INITIAL)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_got = 0

    def get_buffer(self) -> memoryview:
        big = self._big
        if big is not None:
            return memoryview(big)[self._big_got :]
        if self._end == len(self._buf):
            unread = self._end - self._start
            # Only a frame smaller than own_above can be partly here: it fits once compacted.
            # Through a copy: bytearray slice assignment memcpy()s, and these bytes overlap.
            self._buf[:unread] = bytes(self._view[self._start : self._end])
            self._start, self._end = 0, unread
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        """The frames (without their size prefix) that are now whole, in order."""
        big = self._big
        if big is not None:
            self._big_got += nbytes
            if self._big_got < len(big):
                return []
            self._big = None
            return [big]
        self._end += nbytes
        frames: list[bytes | bytearray] = []
        while True:
            avail = self._end - self._start
            if avail < 4:
                break
            (size,) = _SIZE.unpack_from(self._buf, self._start)
            if not 1 <= size <= self.max_size:
                raise FrameSizeError(f"frame size {size} is outside 1..{self.max_size}")
            body = self._start + 4
            if avail - 4 >= size:
                self._start = body + size
                frames.append(bytes(self._view[body : self._start]))
                continue
            if size >= self.own_above:
                have = avail - 4
                own = bytearray(size)
                own[:have] = self._view[body : self._end]
                self._big, self._big_got = own, have
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames
