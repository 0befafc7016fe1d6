"""Log compaction (Kafka's log cleaner): keep the latest record of every key.

`offset_map` maps keys to their last offsets, `manager` chooses what to clean and keeps the
cleaner checkpoint, `cleaner` rewrites segments, and `service` runs it all in the broker.
The crash-safe swap of cleaned segments lives beside the loader, in samsa.log.swap.
"""

from samsa.log.cleaner.cleaner import Cleaner, CleanerStats, LogCleaningAbortedError
from samsa.log.cleaner.cleaner_manager import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleanerManager,
    LogToClean,
)
from samsa.log.cleaner.offset_map import OffsetMap
from samsa.log.cleaner.service import (
    CleanerConfig,
    LogCleaner,
    drive_sync,
)

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "Cleaner",
    "CleanerConfig",
    "CleanerStats",
    "LogCleaner",
    "LogCleanerManager",
    "LogCleaningAbortedError",
    "LogToClean",
    "OffsetMap",
    "drive_sync",
]
