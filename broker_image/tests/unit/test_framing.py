"""FrameReader: whatever way the stream is cut into reads, the frames come out whole, in order,
and a broken size prefix is refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.protocol.framing import FrameReader, FrameSizeError


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def _read(reader: FrameReader, data: bytes, cuts: list[int]) -> list[bytes]:
    """Feed `data` as the socket would: each read fills at most what get_buffer offers."""
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        room = reader.get_buffer()
        want = cuts[i % len(cuts)] if cuts else len(data)
        i += 1
        n = min(len(room), want, len(data) - pos)
        room[:n] = data[pos : pos + n]
        pos += n
        out += [bytes(f) for f in reader.buffer_updated(n)]
    return out


@settings(max_examples=200, deadline=None)
@given(
    frames=st.lists(
        st.one_of(
            st.binary(min_size=1, max_size=300),
            st.integers(1, 200_000).map(lambda n: bytes(range(256)) * (n // 256) + b"z"),
        ),
        min_size=1,
        max_size=12,
    ),
    cuts=st.lists(st.integers(1, 100_000), max_size=8),
)
def test_frames_come_out_whole_and_in_order(frames: list[bytes], cuts: list[int]) -> None:
    reader = FrameReader(max_size=1 << 20, own_above=4096)
    assert _read(reader, _stream(frames), cuts) == frames


@pytest.mark.parametrize("size", [0, -1, (1 << 20) + 1])
def test_a_size_outside_the_limit_is_refused(size: int) -> None:
    reader = FrameReader(max_size=1 << 20)
    room = reader.get_buffer()
    room[:4] = struct.pack(">i", size)
    with pytest.raises(FrameSizeError):
        reader.buffer_updated(4)


def test_a_large_frame_is_handed_over_without_a_copy() -> None:
    reader = FrameReader(max_size=1 << 20, own_above=4096)
    body = bytes(100_000)
    data = _stream([body])
    room = reader.get_buffer()
    room[:1000] = data[:1000]
    assert reader.buffer_updated(1000) == []
    # The rest is read straight into the frame's own buffer, which is the frame.
    rest = reader.get_buffer()
    assert len(rest) == len(data) - 1000
    rest[:] = data[1000:]
    (frame,) = reader.buffer_updated(len(rest))
    assert isinstance(frame, bytearray) and frame == body
