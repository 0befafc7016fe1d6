"""Client quotas' pure logic against Kafka's own numbers: the Rate over samples and its window
(org.apache.kafka.common.metrics.stats.Rate), the throttle time of a violation
(QuotaUtils.throttleTime), the eight entity combinations in Kafka's order of precedence, and
AlterClientQuotas' and DescribeClientQuotas' validation."""

from __future__ import annotations

import pytest

from samsa.quota.entities import (
    CLIENT_ID,
    IP,
    USER,
    QuotaError,
    altered,
    describe_filter,
    entity,
    metric_tags,
    quota_limit,
)
from samsa.quota.manager import QuotaManagers
from samsa.quota.rate import Rate, throttle_time_ms
from samsa.quota.store import entity_path, parse_values, render


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    """A first burst is measured over 10 whole windows of 1 s (11 samples), not over the few
    milliseconds it took: 10 000 bytes at once is 1 000 B/s."""
    rate = Rate(11, 1000)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000)
    # 10.5 s on, with the first sample still kept, the span is the real elapsed time.
    rate.record(0, 10_500)
    assert rate.window_size_ms(10_500) == 10_500


def test_rate_forgets_samples_older_than_the_whole_window() -> None:
    rate = Rate(11, 1000)
    rate.record(5000, 0)
    # 11 s without events: the sample expires, nothing is left.
    assert rate.total(11_000) == 0
    assert rate.measure(11_000) == 0


def test_rate_resets_samples_with_no_recent_event() -> None:
    rate = Rate(2, 1000)
    for t in range(0, 5000, 1000):
        rate.record(100, t)
    # Samples whose last event is samples * window old are reset: those of 3 s and 4 s stay.
    assert rate.total(4000) == 200


def test_throttle_time_is_kafkas_formula() -> None:
    """X = (O - T) / T * W: 2 000 B/s against 1 000 B/s over 10 s asks for 10 s."""
    assert throttle_time_ms(2000, 1000, 10_000) == 10_000
    assert throttle_time_ms(1100, 1000, 10_000) == 1000
    # Halves round up, as Java's Math.round.
    assert throttle_time_ms(2.5, 2, 2) == 1


def test_producer_over_quota_is_throttled_by_the_rate_it_went_over() -> None:
    quotas = QuotaManagers(11, 1)
    quotas.update({entity([(USER, "alice")]): {"producer_byte_rate": 1000}})
    assert quotas.active and quotas.produce.enabled and not quotas.fetch.enabled
    # 10 000 B over the 10 s minimum span is exactly the quota: no throttle.
    assert quotas.produce.record("alice", "p1", 10_000, 0) == 0
    # 1 000 B more: 1 100 B/s, 10 % over: a tenth of the window.
    assert quotas.produce.record("alice", "p2", 1000, 0) == 1000
    # Another user has no quota.
    assert quotas.produce.record("bob", "p1", 10**9, 0) == 0


def test_request_throttle_is_bounded_by_one_window() -> None:
    quotas = QuotaManagers(11, 1)
    quotas.update({entity([(CLIENT_ID, None)]): {"request_percentage": 1}})
    # 100 % of a loop for 10 s against 1 %: bounded to one window.
    assert quotas.request.record("u", "c", 1000, 0) == 1000


def test_a_changed_quota_applies_to_the_running_sensor() -> None:
    quotas = QuotaManagers(11, 1)
    alice = entity([(USER, "alice")])
    quotas.update({alice: {"producer_byte_rate": 1000}})
    assert quotas.produce.record("alice", "", 20_000, 0) > 0
    quotas.update({alice: {"producer_byte_rate": 10_000}})
    assert quotas.produce.record("alice", "", 0, 0) == 0
    quotas.update({})
    assert not quotas.active


ALL = {
    entity([(USER, "u"), (CLIENT_ID, "c")]): 1.0,
    entity([(USER, "u"), (CLIENT_ID, None)]): 2.0,
    entity([(USER, "u")]): 3.0,
    entity([(USER, None), (CLIENT_ID, "c")]): 4.0,
    entity([(USER, None), (CLIENT_ID, None)]): 5.0,
    entity([(USER, None)]): 6.0,
    entity([(CLIENT_ID, "c")]): 7.0,
    entity([(CLIENT_ID, None)]): 8.0,
}
ORDER = list(ALL)


@pytest.mark.parametrize("level", range(8))
def test_the_most_specific_of_the_eight_combinations_governs(level: int) -> None:
    """With the levels above ``level`` removed, that level's quota applies to user u's client
    c, with Kafka's metric tags (who shares it)."""
    limits = {e: v for e, v in ALL.items() if ORDER.index(e) >= level}
    tags = metric_tags(limits, "u", "c")
    assert quota_limit(limits, tags) == level + 1
    expected_tags = [
        ("u", "c"),
        ("u", "c"),
        ("u", ""),
        ("u", "c"),
        ("u", "c"),
        ("u", ""),
        ("", "c"),
        ("", "c"),
    ][level]
    assert tags == expected_tags


def test_other_users_and_clients_fall_to_the_defaults() -> None:
    tags = metric_tags(ALL, "v", "d")
    assert tags == ("v", "d") and quota_limit(ALL, tags) == 5.0
    only_clients = {entity([(CLIENT_ID, "c")]): 7.0}
    assert quota_limit(only_clients, metric_tags(only_clients, "v", "d")) is None


def test_alter_validation_is_kafkas() -> None:
    alice = entity([(USER, "alice")])
    assert altered({}, alice, [("producer_byte_rate", 1024, False)]) == {
        "producer_byte_rate": 1024.0
    }
    assert altered({"request_percentage": 5.0}, alice, [("request_percentage", 0, True)]) == {}
    refusals = {
        "Invalid configuration key bogus": (alice, [("bogus", 1, False)]),
        "Quota producer_byte_rate must be greater than 0": (
            alice,
            [("producer_byte_rate", 0, False)],
        ),
        "producer_byte_rate cannot be a fractional value.": (
            alice,
            [("producer_byte_rate", 1.5, False)],
        ),
        "Invalid empty client quota entity": ((), [("producer_byte_rate", 1, False)]),
        "Unhandled client quota entity type: group": (
            entity([("group", "g")]),
            [("producer_byte_rate", 1, False)],
        ),
        "Empty user not supported": (entity([(USER, "")]), [("producer_byte_rate", 1, False)]),
        "Invalid configuration key producer_byte_rate": (
            entity([(IP, "1.2.3.4")]),
            [("producer_byte_rate", 1, False)],
        ),
    }
    for message, (e, ops) in refusals.items():
        with pytest.raises(QuotaError) as caught:
            altered({}, e, ops)
        assert caught.value.message == message
    with pytest.raises(QuotaError, match="Duplicate quota key"):
        altered({}, alice, [("producer_byte_rate", 1, False), ("producer_byte_rate", 2, False)])
    with pytest.raises(QuotaError, match="too large"):
        altered({}, entity([(IP, None)]), [("connection_creation_rate", 2.0**40, False)])


def test_describe_filters_match_as_kafkas() -> None:
    both = entity([(USER, "u"), (CLIENT_ID, "c")])
    user = entity([(USER, "u")])
    default_user = entity([(USER, None)])
    assert describe_filter([(USER, 0, "u")], False).matches(both)
    assert not describe_filter([(USER, 0, "u")], True).matches(both)
    assert describe_filter([(USER, 0, "u")], True).matches(user)
    assert describe_filter([(USER, 1, None)], False).matches(default_user)
    assert not describe_filter([(USER, 1, None)], False).matches(user)
    assert describe_filter([(USER, 2, None)], False).matches(default_user)
    assert describe_filter([], False).matches(both)
    for components, unsupported in (
        ([(USER, 0, None)], False),
        ([(USER, 1, "u")], False),
        ([(USER, 2, "u")], False),
        ([(USER, 3, None)], False),
        ([("", 2, None)], False),
        ([(USER, 2, None), (USER, 2, None)], False),
        ([(IP, 2, None), (USER, 2, None)], False),
        ([("group", 2, None)], True),
    ):
        with pytest.raises(QuotaError) as caught:
            describe_filter(components, False)
        assert caught.value.unsupported is unsupported


def test_stored_form_is_kafkas_zookeeper_layout() -> None:
    assert entity_path(entity([(USER, "alice"), (CLIENT_ID, None)])) == (
        "users/alice/clients/<default>"
    )
    assert entity_path(entity([(CLIENT_ID, "a b*~")])) == "clients/a%20b%2A%7E"
    assert entity_path(entity([(USER, None)])) == "users/<default>"
    assert render("producer_byte_rate", 1024.0) == "1024"
    assert render("request_percentage", 50) == "50.0"
    # A user's znode also holds its SCRAM credentials; only quota keys are read.
    assert parse_values({"SCRAM-SHA-256": "salt=..", "consumer_byte_rate": "10"}) == {
        "consumer_byte_rate": 10.0
    }
