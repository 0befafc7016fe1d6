"""LogManager: every partition log in one log directory, and the directory's checkpoints.

Kafka's LogManager without its scheduler: the broker calls `cleanup_logs`,
`flush_dirty_logs` and the checkpoint methods periodically.  A clean shutdown leaves the
`.kafka_cleanshutdown` marker so the next start trusts every segment instead of
recovering from the recovery points.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TMP_SUFFIX,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    fsync_dir,
)
from samsa.log.log import Log
from samsa.wall_clock import wall_clock_ms

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")

TopicPartitionKey = tuple[str, int]


class LogManager:
    """Opens, creates, deletes and checkpoints the partition logs under `log_dir`."""

    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._log_dir = log_dir
        self.default_config = default_config
        self._now_ms = now_ms
        self._logs: dict[TopicPartitionKey, Log] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT)
        self._log_starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT)
        self._high_watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        # (topic, partition, offset) after any log is truncated: the cleaner rewinds its
        # checkpoint (Kafka's LogManager.truncateTo does the same).
        self.truncation_listeners: list[Callable[[str, int, int], None]] = []
        log_dir.mkdir(parents=True, exist_ok=True)

    @property
    def log_dir(self) -> Path:
        return self._log_dir

    # -- startup ---------------------------------------------------------------------------

    def load_logs(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Open every `<topic>-<n>` directory; recover unless the last shutdown was clean."""
        self._topic_configs.update(topic_configs or {})
        marker = self._log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        for path in self._log_dir.iterdir():
            if path.name.endswith(TMP_SUFFIX) and path.is_file():
                path.unlink(missing_ok=True)
        dirs = sorted(p for p in self._log_dir.iterdir() if p.is_dir())
        for path in dirs:
            if path.name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing deleted partition directory %s", path)
                shutil.rmtree(path, ignore_errors=True)
        partition_dirs = [p for p in dirs if p.exists() and _PARTITION_DIR.match(p.name)]
        recovery_points = self._read_checkpoint(self._recovery_points, bool(partition_dirs))
        if recovery_points is None:
            clean = False
            recovery_points = {}
        log_starts = self._read_checkpoint(self._log_starts, False) or {}
        for path in partition_dirs:
            match = _PARTITION_DIR.match(path.name)
            assert match is not None
            key = (match.group(1), int(match.group(2)))
            plog = Log.open(
                path,
                self._topic_configs.get(key[0], self.default_config),
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=log_starts.get(key),
                now_ms=self._now_ms,
                clean_shutdown=clean,
            )
            plog.truncation_listener = self._truncated
            self._logs[key] = plog
        if marker.exists():
            # From here on, a crash must lead to recovery.
            marker.unlink()
            fsync_dir(self._log_dir)
        log.info(
            "loaded %d logs from %s after %s shutdown",
            len(self._logs),
            self._log_dir,
            "a clean" if clean else "an unclean",
        )

    def _read_checkpoint(
        self, checkpoint: OffsetCheckpointFile, expected: bool
    ) -> dict[TopicPartitionKey, int] | None:
        try:
            offsets = checkpoint.read()
        except CorruptCheckpointError as exc:
            log.warning("ignoring %s; every log will be recovered", exc)
            return None
        if offsets is None and expected:
            log.warning("%s is missing; every log will be recovered", checkpoint.path)
        return offsets

    # -- logs ------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        plog = self._logs.get((topic, partition))
        if plog is not None:
            return plog
        if config is not None:
            self._topic_configs[topic] = config
        config = self._topic_configs.get(topic, self.default_config)
        plog = Log.open(self._log_dir / f"{topic}-{partition}", config, now_ms=self._now_ms)
        plog.truncation_listener = self._truncated
        fsync_dir(self._log_dir)
        self._logs[(topic, partition)] = plog
        return plog

    def _truncated(self, plog: Log, offset: int) -> None:
        for listener in self.truncation_listeners:
            listener(plog.topic, plog.partition, offset)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and remove its directory (renamed to `...-delete` first, so a
        crash half-way leaves a directory the next start removes)."""
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return False
        for segment in plog.segments:
            segment.close_handles()
        doomed = self._log_dir / f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(plog.dir, doomed)
        fsync_dir(self._log_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    @property
    def logs(self) -> Mapping[TopicPartitionKey, Log]:
        return self._logs

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (name, _), plog in self._logs.items():
            if name == topic:
                plog.update_config(config)

    # -- periodic work ---------------------------------------------------------------------

    def cleanup_logs(self, high_watermark: Callable[[str, int], int | None] | None = None) -> int:
        """Run retention over every log; `high_watermark(topic, partition)` bounds what
        may go (None: the log end offset).  Returns the number of segments deleted."""
        deleted = 0
        for (topic, partition), plog in list(self._logs.items()):
            hw = high_watermark(topic, partition) if high_watermark is not None else None
            deleted += plog.delete_old_segments(hw)
        return deleted

    def remove_expired_producers(self, expiration_ms: int) -> int:
        """Forget the idempotent producers idle for producer.id.expiration.ms; how many."""
        now = self._now_ms()
        return sum(
            plog.producer_state.remove_expired_producers(now, expiration_ms)
            for plog in self._logs.values()
        )

    def flush_dirty_logs(self) -> int:
        """Flush logs past flush.messages unflushed records or flush.ms since their last
        flush; returns how many were flushed."""
        now = self._now_ms()
        flushed = 0
        for plog in self._logs.values():
            config = plog.config
            if plog.unflushed_messages <= 0:
                continue
            if (
                plog.unflushed_messages >= config.flush_messages
                or now - plog.last_flush_ms >= config.flush_ms
            ):
                plog.flush()
                flushed += 1
        return flushed

    def checkpoint_recovery_points(self) -> None:
        self._recovery_points.write({k: v.recovery_point for k, v in self._logs.items()})

    def checkpoint_log_start_offsets(self) -> None:
        self._log_starts.write({k: v.log_start_offset for k, v in self._logs.items()})

    def write_high_watermarks(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Checkpoint the replica layer's high watermarks (`replication-offset-checkpoint`)."""
        self._high_watermarks.write(offsets)

    def read_high_watermarks(self) -> dict[TopicPartitionKey, int]:
        """The checkpointed high watermarks; empty (with a warning) if unreadable."""
        try:
            return self._high_watermarks.read() or {}
        except CorruptCheckpointError as exc:
            log.warning("ignoring %s", exc)
            return {}

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker.

        A log that cannot be written (a full disk) still has its files closed; there is then
        no marker, and the next start recovers what was not flushed."""
        clean = True
        for plog in self._logs.values():
            try:
                plog.flush()
                plog.close()
            except OSError as exc:
                log.error("%r could not be closed cleanly: %s", plog, exc)
                plog.close_handles()
                clean = False
        try:
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
        except OSError as exc:
            log.error("checkpoints not written at shutdown: %s", exc)
            clean = False
        if not clean:
            self._logs.clear()
            return
        marker = self._log_dir / CLEAN_SHUTDOWN_FILE
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self._log_dir)
        self._logs.clear()
