"""The "samsa" data source: Spark's Kafka source, as a Python data source, for batch and
Structured Streaming reads.

The driver plans: it lists the subscribed partitions and their offsets and hands Spark one input
partition per topic-partition range (more with minPartitions). Executors read each range with
their own consumer, which is only assigned partitions, and yield pyarrow RecordBatches. A range
always ends at or below the high watermark seen at planning time, so only committed records are
read. Streaming offsets are the per-partition next offsets, in Spark's own JSON format; Spark's
checkpoint holds them, which makes the source exactly-once with a replayable sink, and no
consumer group is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from samsa_spark.client import Brokers, RangeReader, SamsaDataLossError
from samsa_spark.offsets import (
    TP,
    OffsetRange,
    Positions,
    from_json,
    group_small,
    plan_ranges,
    rate_limit,
    resolve,
    to_json,
)
from samsa_spark.options import OffsetSpec, SourceOptions, parse_source_options
from samsa_spark.schema import source_ddl

log = logging.getLogger(__name__)


class _Planner:
    """Driver-side look-ups shared by the batch and the streaming reader."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._brokers: Brokers | None = None

    @property
    def brokers(self) -> Brokers:
        if self._brokers is None:
            self._brokers = Brokers(
                self.opts.bootstrap, self.opts.kafka, self.opts.metadata_timeout_ms
            )
        return self._brokers

    def __getstate__(self) -> dict[str, Any]:
        # Readers are pickled to executors; librdkafka handles are not picklable.
        return {"opts": self.opts, "_brokers": None}

    def topic_partitions(self) -> list[TP]:
        return self.opts.subscription.select(self.brokers.partitions_by_topic())

    def positions(
        self, spec: OffsetSpec, option: str, tps: list[TP], earliest: Positions, latest: Positions
    ) -> Positions:
        by_ts = (
            self.brokers.list_offsets(tps, spec.timestamp_ms) if spec.kind == "timestamp" else None
        )
        return resolve(
            spec,
            option,
            tps,
            earliest,
            latest,
            by_ts,
            self.opts.fail_on_data_loss,
            self.opts.by_timestamp_strategy,
        )

    def range_reader(self) -> RangeReader:
        o = self.opts
        return RangeReader(
            o.bootstrap,
            o.kafka,
            o.include_headers,
            o.fail_on_data_loss,
            o.poll_timeout_ms,
            columnar=o.reader == "columnar",
        )


class SamsaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.planner = _Planner(opts)

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.planner.opts
        tps = self.planner.topic_partitions()
        earliest = self.planner.brokers.list_offsets(tps, "earliest")
        latest = self.planner.brokers.list_offsets(tps, "latest")
        start = self.planner.positions(opts.starting, "startingOffsets", tps, earliest, latest)
        assert opts.ending is not None
        end = self.planner.positions(opts.ending, "endingOffsets", tps, earliest, latest)
        ranges = plan_ranges(start, end, opts.min_partitions)
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark turns an empty plan into one partition whose value is None.
        if partition.value is not None:
            yield from self.planner.range_reader().read(partition.value)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.planner = _Planner(opts)
        self.target: Positions | None = None  # availableNow: where the query ends
        self.last_latest: Positions | None = None

    def initialOffset(self) -> dict:
        tps = self.planner.topic_partitions()
        earliest = self.planner.brokers.list_offsets(tps, "earliest")
        latest = self.planner.brokers.list_offsets(tps, "latest")
        start = self.planner.positions(
            self.planner.opts.starting, "startingOffsets", tps, earliest, latest
        )
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.planner.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.planner.topic_partitions()
        self.target = self.planner.brokers.list_offsets(tps, "latest")

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        tps = self.planner.topic_partitions()
        self._check_vanished(begin, tps)
        latest = self.planner.brokers.list_offsets(tps, "latest")
        self.last_latest = latest
        new = [tp for tp in tps if tp not in begin]
        if new:
            # New partitions (or topics matching the pattern) are read from their beginning.
            begin = {**begin, **self.planner.brokers.list_offsets(new, "earliest")}
            log.info("samsa: new partitions %s", ", ".join(f"{t}/{p}" for t, p in new))
        ceiling = dict(latest)
        if self.target is not None:
            ceiling = {tp: min(off, self.target.get(tp, begin[tp])) for tp, off in latest.items()}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, ceiling, limit.max_rows)
        else:
            end = ceiling
        return to_json(end)

    def _check_vanished(self, begin: Positions, tps: list[TP]) -> None:
        gone = sorted(set(begin) - set(tps))
        if gone and self.planner.opts.fail_on_data_loss:
            raise SamsaDataLossError(
                "partitions " + ", ".join(f"{t}/{p}" for t, p in gone) + " no longer exist on "
                "the brokers (topic deleted?); set failOnDataLoss=false to go on without them"
            )

    def reportLatestOffset(self) -> dict | None:
        return to_json(self.last_latest) if self.last_latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_json(start)
        stop = from_json(end)
        tps = list(stop)
        brokers = self.planner.brokers
        earliest = brokers.list_offsets(tps, "earliest")
        new = [tp for tp in tps if tp not in begin]
        begin = {**begin, **{tp: earliest[tp] for tp in new}}
        for tp in tps:
            if begin[tp] < earliest[tp] and stop[tp] > begin[tp]:
                msg = (
                    f"records {begin[tp]}..{min(stop[tp], earliest[tp]) - 1} of {tp[0]}/{tp[1]} "
                    f"are gone from the brokers (earliest offset is now {earliest[tp]})"
                )
                if self.planner.opts.fail_on_data_loss:
                    raise SamsaDataLossError(msg + "; set failOnDataLoss=false to skip them")
                log.warning("samsa: %s; skipping them", msg)
                begin[tp] = min(earliest[tp], stop[tp])
            if stop[tp] < begin[tp]:
                msg = (
                    f"offset of {tp[0]}/{tp[1]} went back from {begin[tp]} to {stop[tp]} "
                    "(topic recreated?); records may have been missed"
                )
                if self.planner.opts.fail_on_data_loss:
                    raise SamsaDataLossError(msg + "; set failOnDataLoss=false to go on")
                log.warning("samsa: %s", msg)
        ranges = plan_ranges(begin, stop, self.planner.opts.min_partitions)
        if self.planner.opts.min_partitions:
            return [InputPartition((r,)) for r in ranges]
        return [InputPartition(group) for group in group_small(ranges)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        group: tuple[OffsetRange, ...] = partition.value
        reader = self.planner.range_reader()
        for r in group:
            yield from reader.read(r)

    def commit(self, end: dict) -> None:
        # Spark's checkpoint holds the offsets; nothing is committed to the brokers.
        return None


class SamsaDataSource(DataSource):
    """``spark.read.format("samsa")``: the schema and options of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> str:
        from samsa_spark.options import _bool

        return source_ddl(_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return SamsaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SamsaStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from samsa_spark.sink import SamsaBatchWriter

        return SamsaBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from samsa_spark.sink import SamsaStreamWriter

        return SamsaStreamWriter(self.options, schema)
