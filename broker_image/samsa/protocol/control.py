"""Transaction markers: the control batches that end a transaction (Kafka's
EndTransactionMarker and ControlRecordType).

A marker is a control batch (attributes: transactional and control) holding one record whose
key is `int16 version (0), int16 type` (0 ABORT, 1 COMMIT) and whose value is
`int16 version (0), int32 coordinator epoch`.  It carries the producer id and epoch of the
transaction it ends, and no sequence number.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from samsa.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptRecordError,
    _get_bytes,
    _get_varint,
    _put_bytes,
    _put_varint,
    assemble_batch,
    decompress,
)

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class EndTxnMarker(NamedTuple):
    committed: bool
    coordinator_epoch: int


def build_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """One control batch ending a transaction, at base offset 0 (the leader assigns it)."""
    kind = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
    record = bytearray()
    record.append(0)  # record attributes
    _put_varint(record, 0)  # timestamp delta
    _put_varint(record, 0)  # offset delta
    _put_bytes(record, _KEY.pack(CONTROL_KEY_VERSION, kind))
    _put_bytes(record, _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch))
    _put_varint(record, 0)  # headers
    body = bytearray()
    _put_varint(body, len(record))
    body += record
    return assemble_batch(
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        last_offset_delta=0,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        records_count=1,
        records=bytes(body),
    )


def read_end_txn_marker(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> EndTxnMarker | None:
    """The marker in the control batch at `pos`; None for a control batch that holds no
    marker (emptied by the log cleaner, or of another control type).  Raises
    CorruptRecordError for a record that does not parse."""
    if header.records_count < 1:
        return None
    body = bytes(buf[pos + BATCH_HEADER_SIZE : pos + header.size])
    if header.compression:
        body = decompress(header.compression, body)
    _length, rpos = _get_varint(body, 0)
    rpos += 1  # record attributes
    _ts, rpos = _get_varint(body, rpos)
    _delta, rpos = _get_varint(body, rpos)
    key, rpos = _get_bytes(body, rpos)
    value, rpos = _get_bytes(body, rpos)
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record without a valid key")
    _version, kind = _KEY.unpack_from(key, 0)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("transaction marker without a valid value")
    _version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    return EndTxnMarker(kind == ControlRecordType.COMMIT, coordinator_epoch)
