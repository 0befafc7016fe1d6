"""The pause switch's reading of a resource: only "true" pauses, and resuming drops the
condition and keeps the others."""

from __future__ import annotations

from samsa_operator import pausing


def annotated(value: str | None) -> dict[str, object]:
    annotations = {} if value is None else {pausing.PAUSE_ANNOTATION: value}
    return {"metadata": {"name": "demo", "annotations": annotations}}


def test_only_true_pauses() -> None:
    assert pausing.paused(annotated("true"))
    assert pausing.paused(annotated("True"))
    for value in (None, "false", "", "yes", "1"):
        assert not pausing.paused(annotated(value)), value
    assert not pausing.paused({"metadata": {"name": "demo"}})


def test_resuming_drops_only_the_paused_condition() -> None:
    ready = {"type": "Ready", "status": "False", "reason": "BrokersNotReady"}
    conditions = [ready, pausing.paused_condition(4)]
    assert pausing.was_paused(conditions)
    assert pausing.without_paused(conditions) == [ready]
    assert not pausing.was_paused([ready])
    assert pausing.paused_condition(4)["observedGeneration"] == 4
