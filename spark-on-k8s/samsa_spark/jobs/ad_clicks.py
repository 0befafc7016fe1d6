"""Job (a), AdClickEvents: clicks per campaign in five-minute event-time windows, with a
ten-minute watermark for late clicks, appended to a topic once each window is final.

Input: JSON clicks (`samsa_spark.generator.Click`). Output: one JSON record per campaign and
window, keyed by campaign: ``{"campaign_id", "window_start", "window_end", "clicks"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from samsa_spark.jobs.common import (
    keyed_by_campaign,
    read_stream,
    run_streaming_job,
    write_stream,
)

CLICK_SCHEMA = (
    "click_id STRING, impression_id STRING, ad_id STRING, campaign_id STRING, "
    "user_id STRING, event_time_ms BIGINT"
)
WINDOW = "5 minutes"
WATERMARK = "10 minutes"


def click_counts(raw: DataFrame, window: str = WINDOW, watermark: str = WATERMARK) -> DataFrame:
    clicks = (
        raw.select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("c"))
        .select("c.*")
        .withColumn("event_time", F.timestamp_millis("event_time_ms"))
    )
    counts = (
        clicks.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window), "campaign_id")
        .agg(F.count("*").alias("clicks"))
    )
    return keyed_by_campaign(counts, "clicks")


def start(
    spark: SparkSession,
    bootstrap: str,
    clicks_topic: str,
    output_topic: str,
    checkpoint: str,
    available_now: bool = False,
    source_options: Mapping[str, str] | None = None,
    sink_options: Mapping[str, str] | None = None,
    fmt: str = "samsa",
) -> StreamingQuery:
    raw = read_stream(spark, bootstrap, clicks_topic, source_options, fmt)
    return write_stream(
        click_counts(raw),
        bootstrap,
        output_topic,
        checkpoint,
        available_now,
        sink_options,
        "ad_clicks",
        fmt,
    )


def main(argv: Sequence[str] | None = None) -> None:
    run_streaming_job("samsa-ad-clicks", __doc__ or "", argv, start, "ad-clicks", "ad-click-counts")


if __name__ == "__main__":
    main()
