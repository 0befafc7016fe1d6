"""The checker on hand-made logs: a clean history passes, and each kind of violation (and each
allowed anomaly) is found and counted where it happened."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from chaos.checker import Gap, check, read_logs

T = "chaos-acks-all"


def produce(
    value: str,
    partition: int = 0,
    offset: int | None = 0,
    *,
    t1: float = 0.0,
    ok: bool = True,
    acks: str = "all",
    idempotent: bool = True,
    topic: str = T,
    key: str | None = None,
) -> dict[str, Any]:
    producer, _, seq = value.rpartition(":")
    return {
        "op": "produce",
        "producer": producer,
        "idempotent": idempotent,
        "acks": acks,
        "topic": topic,
        "partition": partition,
        "key": key,
        "value": value,
        "seq": int(seq),
        "t0": t1 - 0.01,
        "t1": t1,
        "ok": ok,
        "offset": offset if ok else None,
    }


def final(
    value: str, offset: int, partition: int = 0, topic: str = T, key: str | None = None
) -> dict[str, Any]:
    return {
        "op": "final",
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": key,
        "value": value,
    }


def clean_history() -> list[dict[str, Any]]:
    ops = []
    for i in range(5):
        ops.append(produce(f"p.0:{i + 1}", offset=i, t1=float(i)))
        ops.append(final(f"p.0:{i + 1}", i))
    return ops


def test_a_clean_history_passes() -> None:
    verdict = check(clean_history())
    assert verdict.ok
    fig = verdict.partitions[f"{T}-0"]
    assert (fig.acked, fig.read, fig.lost, fig.duplicates, fig.reordered) == (5, 5, 0, 0, 0)
    assert verdict.examples == []


def test_an_acknowledged_record_missing_from_the_final_read_is_lost() -> None:
    ops = [op for op in clean_history() if not (op["op"] == "final" and op["offset"] == 2)]
    verdict = check(ops)
    assert not verdict.ok
    assert verdict.partitions[f"{T}-0"].lost == 1
    assert "p.0:3" in verdict.examples[0]


def test_an_idempotent_producers_record_read_twice_is_a_duplicate() -> None:
    verdict = check([*clean_history(), final("p.0:5", 5)])
    assert not verdict.ok
    assert verdict.partitions[f"{T}-0"].duplicates == 1


def test_records_of_one_producer_out_of_sequence_are_reordered() -> None:
    ops = [produce("p.0:1", offset=0), produce("p.0:2", offset=1)]
    ops += [final("p.0:2", 0), final("p.0:1", 1)]
    verdict = check(ops)
    fig = verdict.partitions[f"{T}-0"]
    assert fig.reordered == 1
    # Both acknowledgements named offsets the final read contradicts.
    assert fig.offset_mismatch == 2
    assert not verdict.ok


def test_order_is_judged_per_producer_instance() -> None:
    # Two producers interleaved, and a producer restarted after a fatal error (a new instance
    # whose sequence starts again): no reordering.
    ops = [produce("a.0:1", offset=0), produce("b.0:1", offset=1), produce("a.1:1", offset=2)]
    ops += [final("a.0:1", 0), final("b.0:1", 1), final("a.1:1", 2)]
    assert check(ops).ok


def test_records_read_but_never_acknowledged_are_counted_and_allowed() -> None:
    ops = [*clean_history(), produce("p.0:6", ok=False), final("p.0:6", 5), final("x.0:1", 6)]
    verdict = check(ops)
    assert verdict.ok
    assert verdict.partitions[f"{T}-0"].unacked_read == 2


def test_acks1_losses_are_counted_apart_and_blamed_on_the_fault_under_way() -> None:
    ops = [
        produce("w.0:1", offset=0, t1=1.0, acks="1", idempotent=False, topic="one"),
        produce("w.0:2", offset=1, t1=5.0, acks="1", idempotent=False, topic="one"),
        final("w.0:1", 0, topic="one"),
        {"op": "fault", "kind": "kill-broker", "t_inject": 4.0, "t_heal": 6.0, "t_recovered": 8.0},
    ]
    verdict = check(ops)
    assert verdict.ok
    assert verdict.partitions["one-0"].acks1_lost == 1
    assert verdict.acks1_lost_by_kind == {"kill-broker": 1}


def test_a_compacted_topic_may_lose_a_value_superseded_by_a_later_one_of_its_key() -> None:
    ops = [
        {"op": "compacted", "topic": "c"},
        produce("k.0:1", offset=0, topic="c", key="k1"),
        produce("k.0:2", offset=1, topic="c", key="k2"),
        produce("k.0:3", offset=2, topic="c", key="k1"),
        final("k.0:2", 1, topic="c", key="k2"),
        final("k.0:3", 2, topic="c", key="k1"),
    ]
    assert check(ops).ok
    # Without the later value of k1, its first is lost.
    ops = [op for op in ops if op.get("value") != "k.0:3" or op["op"] != "final"]
    assert check(ops).partitions["c-0"].lost == 2


def commit(offset: int, t1: float, member: str = "m", ok: bool = True) -> dict[str, Any]:
    return {
        "op": "commit",
        "member": member,
        "topic": T,
        "partition": 0,
        "offset": offset,
        "t0": t1 - 0.01,
        "t1": t1,
        "ok": ok,
    }


def test_a_committed_offset_going_backwards_is_a_violation() -> None:
    verdict = check([*clean_history(), commit(3, 10.0), commit(2, 11.0)])
    assert verdict.partitions[f"{T}-0"].offsets_backwards == 1
    assert not verdict.ok
    # A failed commit of a lower offset is no regression.
    assert check([*clean_history(), commit(3, 10.0), commit(2, 11.0, ok=False)]).ok


def test_a_member_resuming_before_the_last_commit_is_a_violation() -> None:
    history = [
        *clean_history(),
        commit(4, 10.0, member="a"),
        {"op": "assign", "member": "b", "t": 11.0, "partitions": [0]},
    ]

    def resumed_at(offset: int) -> dict[str, Any]:
        return {
            "op": "consume",
            "member": "b",
            "t": 12.0,
            "topic": T,
            "partition": 0,
            "offset": offset,
            "value": f"p.0:{offset + 1}",
        }

    assert check([*history, resumed_at(4)]).ok
    verdict = check([*history, resumed_at(1)])
    assert verdict.partitions[f"{T}-0"].offsets_backwards == 1


def test_the_groups_final_committed_offset_below_a_successful_commit_is_a_violation() -> None:
    ops = [*clean_history(), commit(4, 10.0)]
    committed = {"op": "committed", "topic": T, "partition": 0, "offset": 2}
    assert check([*ops, committed]).partitions[f"{T}-0"].offsets_backwards == 1


def test_unavailability_is_the_longest_gap_between_acks_blamed_on_the_fault_under_way() -> None:
    ops = [produce(f"p.0:{i + 1}", offset=i, t1=t) for i, t in enumerate([0.0, 0.1, 5.1, 5.2])]
    ops += [final(f"p.0:{i + 1}", i) for i in range(4)]
    ops.append(
        {"op": "fault", "kind": "pause-long", "t_inject": 0.2, "t_heal": 4, "t_recovered": 6}
    )
    verdict = check(ops)
    assert verdict.ok
    assert verdict.gaps_by_kind == {"pause-long": 5.0}
    # The pause held 3.8 s; writes came back 1.1 s after it was healed.
    assert verdict.gap_details == {"pause-long": Gap(5.0, 3.8, 1.1)}


def test_logs_are_read_from_every_json_lines_file_and_a_torn_last_line_is_skipped(
    tmp_path: Path,
) -> None:
    ops = clean_history()
    (tmp_path / "w.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops[::2]))
    (tmp_path / "final.jsonl").write_text(
        "".join(json.dumps(o) + "\n" for o in ops[1::2]) + '{"op": "fin'
    )
    # Files in name order: final.jsonl, then w.jsonl.
    assert read_logs(tmp_path) == ops[1::2] + ops[::2]


def test_the_checker_shares_no_code_with_the_broker() -> None:
    code = (
        "import sys, chaos.checker; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'samsa'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_consumed_record_that_the_final_read_contradicts_is_a_violation() -> None:
    def consumed(offset: int, value: str) -> dict[str, Any]:
        return {
            "op": "consume",
            "member": "m",
            "t": 1.0,
            "topic": T,
            "partition": 0,
            "offset": offset,
            "value": value,
        }

    assert check([*clean_history(), consumed(2, "p.0:3")]).ok
    # Consumed below the high watermark, then truncated away and the offset reused.
    verdict = check([*clean_history(), consumed(2, "q.0:1")])
    assert verdict.partitions[f"{T}-0"].consumed_diverged == 1
    assert not verdict.ok


def test_an_acknowledgement_without_an_offset_needs_only_the_record_found() -> None:
    # librdkafka's idempotent producer acknowledges a batch whose answer was lost, without an
    # offset, once a later batch is acknowledged.
    ops = [*clean_history(), produce("p.0:6", offset=None), final("p.0:6", 5)]
    verdict = check(ops)
    assert verdict.ok
    assert verdict.partitions[f"{T}-0"].acked_without_offset == 1
    assert not check([*clean_history(), produce("p.0:6", offset=None)]).ok


def test_a_compacted_value_acknowledged_without_offset_is_superseded_by_a_later_sequence() -> None:
    ops = [
        {"op": "compacted", "topic": "c"},
        produce("k.0:1", offset=None, topic="c", key="k1"),
        produce("k.0:2", offset=1, topic="c", key="k1"),
        final("k.0:2", 1, topic="c", key="k1"),
    ]
    assert check(ops).ok
    # Another producer's later record of the key says nothing of this producer's order.
    ops[2:] = [
        produce("j.0:2", offset=1, topic="c", key="k1"),
        final("j.0:2", 1, topic="c", key="k1"),
    ]
    assert check(ops).partitions["c-0"].lost == 1
