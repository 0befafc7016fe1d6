"""FileRegion: stored bytes to be sent straight from a file to a socket, never copied in Python.

A region owns a duplicate of the segment's file descriptor, so a segment deleted or closed by
retention while a response is on its way cannot pull the file away (or, worse, let the number
be reused by another file); the region closes its descriptor once sent or dropped.
"""

from __future__ import annotations

import os


class FileRegion:
    __slots__ = ("count", "fd", "offset")

    def __init__(self, fd: int, offset: int, count: int) -> None:
        self.fd = os.dup(fd)
        self.offset = offset
        self.count = count

    def __len__(self) -> int:
        return self.count

    def read(self) -> bytes:
        """The bytes themselves, for the rare caller that needs them in memory."""
        data = os.pread(self.fd, self.count, self.offset)
        if len(data) != self.count:
            raise OSError(f"file region shrank: {len(data)} of {self.count} bytes left")
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, offset={self.offset}, count={self.count})"
