"""The seed corpus: ``python -m fuzz.seeds`` writes it into fuzz/corpus/<target>/.

Requests are built with kio from hypothesis's derandomized strategies for each request type
(a rerun changes a few bytes of some: the committed corpus is the reference), Produce's
with real record batches; batches are
built by the broker's own encoder with every codec; the recovery seeds are the files of a
real partition directory (see fuzz.recovery); the SASL seeds are real PLAIN and SCRAM
client messages.
"""

from __future__ import annotations

import hashlib
import shutil
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from fuzz.harness import corpus_dir
from samsa.handlers.registry import default_apis
from samsa.protocol.control import build_end_txn_marker
from samsa.protocol.messages import encode_request, request_type
from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    build_batch,
)
from samsa.protocol.replica_fetch import VERSION as REPLICA_FETCH_VERSION
from samsa.protocol.replica_fetch import encode_replica_fetch

CODECS = (
    COMPRESSION_NONE,
    COMPRESSION_GZIP,
    COMPRESSION_SNAPPY,
    COMPRESSION_LZ4,
    COMPRESSION_ZSTD,
)
EXAMPLES_PER_VERSION = 2
# Seeds stay small: libFuzzer's default -max_len follows the largest seed.
LARGEST = 2048


def real_batches() -> list[bytes]:
    """Batches as producers send them: each codec, keys and headers, idempotent,
    transactional, and a transaction marker."""
    records = [(b"key-%d" % i, b"value-%d" % i * 3, [("h", b"v")]) for i in range(4)]
    out = [build_batch(records, timestamp_ms=1_700_000_000_000, compression=c) for c in CODECS]
    out.append(build_batch([(None, b"keyless", [])], timestamp_ms=1))
    out.append(build_batch([(b"k", None, [])], timestamp_ms=1))  # a tombstone
    out.append(
        build_batch(records[:2], producer_id=7, producer_epoch=0, base_sequence=0, timestamp_ms=1)
    )
    out.append(
        build_batch(
            records[:1],
            producer_id=8,
            producer_epoch=1,
            base_sequence=0,
            transactional=True,
            compression=COMPRESSION_ZSTD,
        )
    )
    out.append(build_end_txn_marker(8, 1, True, 3, 1_700_000_000_000))
    return out


def _write(target: str, files: dict[str, bytes]) -> int:
    out = corpus_dir(target)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return len(files)


def _examples(cls: Any, count: int) -> list[Any]:
    found: list[Any] = []

    @settings(
        max_examples=count * 4,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.from_type(cls))
    def collect(value: Any) -> None:
        found.append(value)

    collect()
    return found


def request_seeds() -> dict[str, bytes]:
    batches = real_batches()
    st.register_type_strategy(Records, st.sampled_from(batches))
    files: dict[str, bytes] = {}
    for api in default_apis():
        for version in range(api.min_version, api.max_version + 1):
            try:
                cls = request_type(api.key, version)
            except Exception:
                continue  # Produce v0-v2: no schema; the broker closes the connection on them
            kept = 0
            for value in _examples(cls, EXAMPLES_PER_VERSION):
                # Without the size prefix: what the dispatcher is handed.
                frame = encode_request(api.key, version, kept + 1, "fuzz-seed", value)[4:]
                if len(frame) > LARGEST:
                    continue
                files[f"{api.key:02d}-{api.name}-v{version}-{kept}"] = frame
                kept += 1
                if kept == EXAMPLES_PER_VERSION:
                    break
    # A follower's fetch, the shape the replicas send (kio's examples rarely have it: no tagged
    # fields, no forgotten topics).
    follower = encode_replica_fetch(
        2, 500, 1, 10 << 20, [("t", [(0, 4, 100, 3, 0, 1 << 20), (1, 4, 7, 3, 0, 1 << 20)])]
    )
    files[f"01-Fetch-v{REPLICA_FETCH_VERSION}-follower"] = encode_request(
        1, REPLICA_FETCH_VERSION, 1, "broker-2", follower
    )[4:]
    return files


def record_seeds() -> dict[str, bytes]:
    from fuzz.records import FIX_CRC, FROM_CLIENT

    files: dict[str, bytes] = {}
    batches = real_batches()
    for i, batch in enumerate(batches):
        files[f"batch-{i}"] = bytes([FROM_CLIENT]) + batch
        files[f"batch-{i}-crc-fixed"] = bytes([FROM_CLIENT | FIX_CRC]) + batch
    files["two-batches-replicated"] = bytes([FIX_CRC]) + batches[0] + batches[2]
    # 64 KiB of zeros in a few dozen bytes of zstd: mutations grow it towards a bomb.
    zeros = build_batch([(b"k", bytes(1 << 16), [])], compression=COMPRESSION_ZSTD)
    files["zstd-zeros-crc-fixed"] = bytes([FROM_CLIENT | FIX_CRC]) + zeros
    return files


def recovery_seeds() -> dict[str, bytes]:
    from fuzz.recovery import BASE_FILES, seed_input

    return {
        f"{i:02d}-{name}{'-clean' if clean else ''}": seed_input(i, clean)
        for i, name in enumerate(BASE_FILES)
        for clean in (False, True)
    }


def sasl_seeds() -> dict[str, bytes]:
    from fuzz.sasl import seed_inputs

    return seed_inputs()


def main() -> None:
    for target, build in (
        ("requests", request_seeds),
        ("records", record_seeds),
        ("recovery", recovery_seeds),
        ("sasl", sasl_seeds),
    ):
        files = build()
        digest = hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()[:12]
        print(f"{target}: {_write(target, files)} seeds ({digest})")


if __name__ == "__main__":
    main()
