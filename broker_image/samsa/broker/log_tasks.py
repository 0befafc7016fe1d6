"""The log manager's background work in a broker: the periodic jobs Kafka's LogManager
schedules at start-up (retention, the recovery-point and log-start-offset checkpoints, the
flusher) with the expiration of idle producer ids, and the log cleaner."""

from __future__ import annotations

import logging
from collections.abc import Callable

from samsa import faults
from samsa.broker.scheduler import KafkaScheduler
from samsa.config import KafkaConfig
from samsa.log import LogManager
from samsa.log.cleaner import CleanerConfig, LogCleaner
from samsa.metadata import TopicPartition
from samsa.replica import ReplicaManager

log = logging.getLogger(__name__)


class LogManagerTasks:
    def __init__(
        self,
        log_manager: LogManager,
        dynamic_config: Callable[[], KafkaConfig],
        on_retention: Callable[[], None] = lambda: None,
    ) -> None:
        self.log_manager = log_manager
        self.dynamic_config = dynamic_config
        # Segments were deleted: log start offsets may have moved (the fetch sessions' cue).
        self.on_retention = on_retention

    def schedule(self, scheduler: KafkaScheduler, config: KafkaConfig) -> None:
        scheduler.schedule(config["log.retention.check.interval.ms"], self._retention)
        scheduler.schedule(config["log.flush.offset.checkpoint.interval.ms"], self._checkpoint)
        scheduler.schedule(
            config["producer.id.expiration.check.interval.ms"], self._expire_producers
        )
        flush_interval = config["log.flush.scheduler.interval.ms"]
        if flush_interval < 2**62:
            scheduler.schedule(flush_interval, self._flush)

    def _retention(self) -> None:
        deleted = self.log_manager.cleanup_logs()
        if deleted:
            log.info("retention deleted %d segments", deleted)
            self.on_retention()
            self.log_manager.checkpoint_log_start_offsets()

    def _expire_producers(self) -> None:
        expired = self.log_manager.remove_expired_producers(
            self.dynamic_config()["producer.id.expiration.ms"]
        )
        if expired:
            log.info("expired %d idle producer ids (producer.id.expiration.ms)", expired)

    def _checkpoint(self) -> None:
        self.log_manager.checkpoint_recovery_points()
        self.log_manager.checkpoint_log_start_offsets()

    def _flush(self) -> None:
        self.log_manager.flush_dirty_logs()


def start_log_cleaner(
    log_manager: LogManager, config: KafkaConfig, replica_manager: ReplicaManager
) -> LogCleaner:
    """Kafka's log cleaner: compacts logs with cleanup.policy=compact in the background,
    never past a partition's high watermark."""

    def last_stable_offset(topic: str, partition: int) -> int | None:
        # Compaction stops at the LSO: an open transaction's records may yet be aborted.
        hosted = replica_manager.get_partition(TopicPartition(topic, partition))
        return hosted.last_stable_offset if hosted is not None else None

    cleaner = LogCleaner(
        log_manager,
        CleanerConfig.from_properties(config.values),
        last_stable=last_stable_offset,
        crash_hook=faults.cleaner_crash_hook(),
    )
    if cleaner.config.enable:
        cleaner.start()
    return cleaner
