"""Job (b): click-through rates from a stream-stream join of impressions and clicks.

A click counts for its impression when it comes within ten minutes after it (a left outer join
with an event-time bound, so impressions without a click are kept and emitted once the
watermark passes their ten minutes). Impressions and clicks are then counted per campaign in
five-minute windows of impression time; each window is appended once final, as JSON keyed by
campaign: ``{"campaign_id", "window_start", "window_end", "impressions", "clicks", "ctr"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from samsa_spark.jobs.ad_clicks import CLICK_SCHEMA
from samsa_spark.jobs.common import (
    keyed_by_campaign,
    read_stream,
    run_streaming_job,
    write_stream,
)

IMPRESSION_SCHEMA = (
    "impression_id STRING, ad_id STRING, campaign_id STRING, user_id STRING, event_time_ms BIGINT"
)
JOIN_WINDOW = "10 minutes"
WINDOW = "5 minutes"
WATERMARK = "10 minutes"


def _parse(raw: DataFrame, schema: str) -> DataFrame:
    return raw.select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select("e.*")


def click_through(impressions_raw: DataFrame, clicks_raw: DataFrame) -> DataFrame:
    imps = (
        _parse(impressions_raw, IMPRESSION_SCHEMA)
        .select(
            "impression_id",
            "campaign_id",
            F.timestamp_millis("event_time_ms").alias("imp_time"),
        )
        .withWatermark("imp_time", WATERMARK)
    )
    clicks = (
        _parse(clicks_raw, CLICK_SCHEMA)
        .select(
            F.col("impression_id").alias("click_impression_id"),
            "click_id",
            F.timestamp_millis("event_time_ms").alias("click_time"),
        )
        .withWatermark("click_time", WATERMARK)
    )
    joined = imps.join(
        clicks,
        F.expr(
            "click_impression_id = impression_id AND click_time >= imp_time AND "
            f"click_time <= imp_time + interval {JOIN_WINDOW}"
        ),
        "leftOuter",
    )
    rates = (
        joined.groupBy(F.window("imp_time", WINDOW), "campaign_id")
        .agg(F.count("*").alias("impressions"), F.count("click_id").alias("clicks"))
        .withColumn("ctr", F.round(F.col("clicks") / F.col("impressions"), 4))
    )
    return keyed_by_campaign(rates, "impressions", "clicks", "ctr")


def start(
    spark: SparkSession,
    bootstrap: str,
    impressions_topic: str,
    clicks_topic: str,
    output_topic: str,
    checkpoint: str,
    available_now: bool = False,
    source_options: Mapping[str, str] | None = None,
    sink_options: Mapping[str, str] | None = None,
    fmt: str = "samsa",
) -> StreamingQuery:
    imps = read_stream(spark, bootstrap, impressions_topic, source_options, fmt)
    clicks = read_stream(spark, bootstrap, clicks_topic, source_options, fmt)
    return write_stream(
        click_through(imps, clicks),
        bootstrap,
        output_topic,
        checkpoint,
        available_now,
        sink_options,
        "ctr",
        fmt,
    )


def main(argv: Sequence[str] | None = None) -> None:
    run_streaming_job(
        "samsa-ctr", __doc__ or "", argv, start, "ad-impressions", "ad-clicks", "ad-ctr"
    )


if __name__ == "__main__":
    main()
