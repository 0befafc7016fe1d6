"""Array counts no frame could hold are refused as malformed requests before kio's native
reader reserves room for them (found by fuzz/requests.py: a 17-byte Metadata v12 request
declaring 2^33 topics aborted the broker's process on a failed allocation).

Each case is decoded in a child process, so that a regression shows as that process dying
rather than taking the test run down with it."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from samsa.protocol.messages import InvalidRequestError, decode_request, request_type
from samsa.protocol.wire import encode_uvarint

_HEADER_V1 = struct.Struct(">hhih")


def _metadata_frame(version: int, count_bytes: bytes) -> tuple[bytes, int]:
    header = _HEADER_V1.pack(3, version, 1, -1)
    if version >= 9:
        header += b"\x00"  # no tagged fields in header v2
    return header + count_bytes, len(header)


CASES = {
    # a compact array of 2^33 topics: 64 GiB of element slots
    "compact-2^33": (12, encode_uvarint(2**33 + 1)),
    "compact-2^35": (12, b"\xff\xff\xff\xff\x7f"),
    # a legacy array of 2^31-1 topics: 16 GiB
    "legacy-2^31": (4, struct.pack(">i", 2**31 - 1)),
    # a count one more than the bytes that follow it could hold
    "one-too-many": (12, encode_uvarint(2 + 1) + b"\x00"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_count_larger_than_the_frame_is_a_malformed_request(case: str) -> None:
    version, count = CASES[case]
    frame, offset = _metadata_frame(version, count)
    script = (
        "import sys\n"
        "from samsa.protocol.messages import InvalidRequestError, decode_request\n"
        f"frame = {frame!r}\n"
        "try:\n"
        f"    decode_request(3, {version}, frame, {offset})\n"
        "except InvalidRequestError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused:"), done.stdout


def test_counts_the_frame_can_hold_still_decode() -> None:
    cls = request_type(3, 12)
    topics = [("a", b"\x00" * 16), ("bb", b"\x01" * 16)]
    body = encode_uvarint(len(topics) + 1)
    for name, topic_id in topics:
        body += topic_id + encode_uvarint(len(name) + 1) + name.encode() + b"\x00"
    body += b"\x01\x00\x00"  # allow auto creation, no authorized operations, no tags
    frame, offset = _metadata_frame(12, b"")
    request = decode_request(3, 12, frame + body, offset)
    assert isinstance(request, cls)
    assert [t.name for t in request.topics] == ["a", "bb"]
    with pytest.raises(InvalidRequestError):
        decode_request(3, 12, frame + body[:-4], offset)


def test_a_null_where_the_schema_allows_none_is_a_malformed_request() -> None:
    """kio reads a null array as None whatever the schema says, and handlers iterate it: the
    fuzzer's ListOffsets with a null topics array raised TypeError in its handler."""
    frame = _HEADER_V1.pack(2, 1, 7, -1) + struct.pack(">ii", -1, -1)
    with pytest.raises(InvalidRequestError, match="cannot be null"):
        decode_request(2, 1, frame, _HEADER_V1.size)


def test_a_null_where_the_schema_allows_it_still_decodes() -> None:
    # Metadata v4's topics are nullable: null asks for every topic.
    frame = _HEADER_V1.pack(3, 4, 7, -1) + struct.pack(">ib", -1, 1)
    assert decode_request(3, 4, frame, _HEADER_V1.size).topics is None
