"""Request frames (without their size prefix) of every API key and version the broker
advertises, through the dispatcher's own reading: header, then body (kio's reader, or the
hand-written Produce parser).  Each must decode or raise InvalidRequestError, which the
dispatcher turns into a closed connection; nothing else, and no hang.

An input naming an API key or version the broker does not serve is steered onto one it does
(the dispatcher closes the connection on those before reading further: nothing to fuzz), so
that every mutation exercises a decoder.
"""

from __future__ import annotations

import contextlib
import struct

import atheris

# The decoders are instrumented for coverage, not the handlers behind them (which atheris's
# bytecode rewriter cannot all take anyway).
with atheris.instrument_imports(include=["samsa.protocol", "samsa.handlers.apis", "kio"]):
    import kio.serial  # noqa: F401

    from samsa.protocol.messages import InvalidRequestError, peek_api, request_type
    from samsa.protocol.produce_request import parse_produce_request  # noqa: F401

from fuzz.harness import main
from samsa.handlers.apis import Api, read_request
from samsa.handlers.registry import default_apis

TARGET = "requests"
TABLE: dict[int, Api] = {api.key: api for api in default_apis()}
SERVED: list[tuple[int, int]] = [
    (api.key, version)
    for api in TABLE.values()
    for version in range(api.min_version, api.max_version + 1)
]
# kio loads each version's schema module on first use: load them all now, instrumented.
with atheris.instrument_imports(include=["kio"]):
    for _key, _version in SERVED:
        # Produce v0-v2 have no schema: parsed by hand.
        with contextlib.suppress(Exception):
            request_type(_key, _version)
_KEY_VERSION = struct.Struct(">hh")


def steer(frame: bytes) -> tuple[Api, int, bytes]:
    """The frame's API and version if the broker serves them, else a served pair chosen by
    the bytes that named the unserved one, written into the frame."""
    key, version, _ = peek_api(frame)
    api = TABLE.get(key)
    if api is not None and api.min_version <= version <= api.max_version:
        return api, version, frame
    key, version = SERVED[((key & 0xFFFF) << 16 | (version & 0xFFFF)) % len(SERVED)]
    return TABLE[key], version, _KEY_VERSION.pack(key, version) + frame[4:]


def one_input(data: bytes) -> None:
    try:
        api, version, frame = steer(data)
    except InvalidRequestError:
        return  # shorter than a header: the dispatcher closes the connection
    for buf in (frame, memoryview(bytearray(frame))):
        with contextlib.suppress(InvalidRequestError):
            read_request(api, version, buf)


if __name__ == "__main__":
    main(TARGET, one_input)
