"""The side port: /healthz, /readyz and Prometheus /metrics with Kafka-like names."""

from __future__ import annotations

import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import InProcessBroker


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_health_ready_and_metrics(samsa_broker: InProcessBroker) -> None:
    assert _get(samsa_broker.http_url + "/healthz")[0] == 200
    assert _get(samsa_broker.http_url + "/readyz") == (200, "ready\n")

    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers})
    admin.create_topics([NewTopic("metered", 2, 1)])["metered"].result(10)
    producer = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})
    for i in range(50):
        producer.produce("metered", value=b"x" * 100, partition=i % 2)
    assert producer.flush(10) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": samsa_broker.bootstrap_servers,
            "group.id": "m",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("metered", p, 0) for p in range(2)])
    got = 0
    deadline = time.monotonic() + 20
    while got < 50 and time.monotonic() < deadline:
        got += len(consumer.consume(50, 1.0))
    consumer.close()
    assert got == 50

    status, text = _get(samsa_broker.http_url + "/metrics")
    assert status == 200
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert samples['kafka_server_broker_topic_metrics_messages_in_total{topic="metered"}'] == 50
    assert samples['kafka_server_broker_topic_metrics_bytes_in_total{topic="metered"}'] > 5000
    assert samples['kafka_log_log_end_offset{partition="0",topic="metered"}'] == 25
    assert samples['kafka_log_log_end_offset{partition="1",topic="metered"}'] == 25
    assert samples['kafka_network_request_metrics_requests_total{request="Produce"}'] >= 1
    # A consumer's Fetch is counted as FetchConsumer, as Kafka's RequestMetrics count it.
    assert samples['kafka_network_request_metrics_requests_total{request="FetchConsumer"}'] >= 1
    assert 'kafka_network_request_metrics_requests_total{request="Fetch"}' not in samples
    assert samples['kafka_server_broker_topic_metrics_messages_out_total{topic="metered"}'] == 50
    assert samples['kafka_server_broker_topic_metrics_bytes_out_total{topic="metered"}'] > 5000
    assert samples["kafka_server_socket_server_metrics_connection_count"] >= 1
    stage = 'kafka_server_replication_stage_time_seconds_count{{stage="{}"}}'.format
    assert samples[stage("produce_append")] >= 1
    assert samples[stage("high_watermark")] >= 2  # a batch on each partition, at once (RF=1)
    assert samples[stage("follower_append")] == 0
