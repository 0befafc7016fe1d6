"""The storage layer: Kafka's segmented partition logs, laid out on disk as Kafka does."""

from samsa.log.checkpoint import CorruptCheckpointError, OffsetCheckpointFile
from samsa.log.epoch import EpochEntry, LeaderEpochCache
from samsa.log.errors import (
    InvalidOffsetError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
)
from samsa.log.index import OffsetIndex, TimeIndex
from samsa.log.info import FetchDataInfo, LogAppendInfo
from samsa.log.local_log import parse_partition_dir
from samsa.log.log import Log
from samsa.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from samsa.log.segment import LogSegment

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "CorruptCheckpointError",
    "EpochEntry",
    "FetchDataInfo",
    "InvalidOffsetError",
    "LeaderEpochCache",
    "Log",
    "LogAppendInfo",
    "LogManager",
    "LogSegment",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "TimeIndex",
    "UnexpectedAppendOffsetError",
    "parse_partition_dir",
]
