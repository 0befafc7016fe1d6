"""Bad input gets a Spark error that names the option or the broker, in a few lines."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException
from spark_support import produce

from samsa.testing import free_port


def _error(spark, **options) -> str:
    reader = spark.read.format("samsa")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(PySparkException) as info:
        reader.load().collect()
    message = str(info.value)
    # A short message, not pages of Python frames.
    assert message.count('File "') <= 4, message
    return message


def test_unknown_topic_names_the_option(spark, bootstrap):
    msg = _error(spark, **{"kafka.bootstrap.servers": bootstrap, "subscribe": "no-such-topic"})
    assert "option subscribe: unknown topic no-such-topic" in msg


def test_malformed_starting_offsets(spark, bootstrap, make_topic):
    topic = make_topic(1)
    msg = _error(
        spark,
        **{
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic,
            "startingOffsets": '{"' + topic + '": {"0": 1',
        },
    )
    assert "option startingOffsets: malformed JSON" in msg


def test_offsets_out_of_range_fail_or_are_skipped_by_failOnDataLoss(spark, bootstrap, make_topic):
    topic = make_topic(1)
    produce(bootstrap, topic, [(None, b"x")] * 10)
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": json.dumps({topic: {"0": 500}}),
    }
    msg = _error(spark, **options)
    assert f"option startingOffsets: offset 500 of {topic}/0 is out of range" in msg
    assert "failOnDataLoss=false" in msg

    reader = spark.read.format("samsa")
    for k, v in {**options, "failOnDataLoss": "false"}.items():
        reader = reader.option(k, v)
    assert reader.load().count() == 0  # starts at the end instead

    options["startingOffsets"] = json.dumps({topic: {"0": 7}})
    reader = spark.read.format("samsa")
    for k, v in options.items():
        reader = reader.option(k, v)
    assert sorted(r.offset for r in reader.load().collect()) == [7, 8, 9]


def test_unreachable_brokers_are_named(spark):
    address = f"127.0.0.1:{free_port()}"
    msg = _error(
        spark,
        **{"kafka.bootstrap.servers": address, "subscribe": "t", "metadataTimeoutMs": "1500"},
    )
    assert f"kafka.bootstrap.servers={address}" in msg
    assert "could not get metadata" in msg


def test_option_mistakes_are_named(spark, bootstrap):
    assert "exactly one of the options subscribe, subscribePattern or assign" in _error(
        spark, **{"kafka.bootstrap.servers": bootstrap}
    )
    assert "option kafka.bootstrap.servers is required" in _error(spark, subscribe="t")
    assert "option failOnDataLoss must be true or false" in _error(
        spark, **{"kafka.bootstrap.servers": bootstrap, "subscribe": "t", "failOnDataLoss": "yes"}
    )
