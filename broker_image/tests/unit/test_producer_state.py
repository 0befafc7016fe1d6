"""Producer state: the checks a leader makes on idempotent producers' batches, and the
state that replicated and recovered batches leave behind (no files involved)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.log.producer_state import (
    INT32_MAX,
    BatchMetadata,
    InvalidProducerEpochError,
    InvalidProducerRecordError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
    decrement_sequence,
    increment_sequence,
)
from samsa.log.producer_state_manager import ProducerStateManager
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader

PID = 4000


def header(
    seq: int,
    n: int = 1,
    epoch: int = 0,
    pid: int = PID,
    ts: int = 1000,
    base_offset: int = 0,
    attributes: int = 0,
) -> BatchHeader:
    return BatchHeader(
        base_offset, 49 + 20 * n, -1, 2, 0, attributes, n - 1, ts, ts, pid, epoch, seq, n
    )


class Leader:
    """A partition leader's producer state with a log end offset: appends as the Log does."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = ProducerStateManager(tmp_path, "t-0")
        self.end = 0
        self.log: list[tuple[int, int, int]] = []  # (producer id, first seq, last seq)

    def append(self, *headers: BatchHeader, log_append_time: int = -1) -> int:
        """The offset the client is told: a new append's, or the duplicated batch's."""
        pending = self.state.prepare_leader_append(headers, self.end, log_append_time)
        if isinstance(pending, BatchMetadata):
            return pending.first_offset
        first = self.end
        for h in headers:
            self.log.append((h.producer_id, h.base_sequence, h.base_sequence + h.last_offset_delta))
            self.end += h.last_offset_delta + 1
        self.state.complete_append(pending, self.end)
        return first


@pytest.fixture
def leader(tmp_path: Path) -> Leader:
    return Leader(tmp_path)


def test_sequence_arithmetic_wraps_like_kafka() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(8, 3) == 5


def test_in_sequence_batches_are_appended_and_remembered(leader: Leader) -> None:
    assert leader.append(header(0, n=3)) == 0
    assert leader.append(header(3, n=2)) == 3
    entry = leader.state.last_entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 0
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches] == [
        (0, 2, 0, 2),
        (3, 4, 3, 4),
    ]
    assert leader.state.map_end_offset == 5
    assert leader.state.last_data_offsets() == {PID: 4}


def test_a_retry_of_any_of_the_last_five_batches_gets_its_original_offset(
    leader: Leader,
) -> None:
    offsets = [leader.append(header(seq * 2, n=2)) for seq in range(7)]
    assert offsets == [0, 2, 4, 6, 8, 10, 12]
    for seq in range(2, 7):
        assert leader.append(header(seq * 2, n=2)) == offsets[seq]
    assert leader.end == 14, "a duplicate must not be appended"
    # The sixth-newest batch is forgotten: its retry is out of order, not a duplicate.
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(header(2, n=2))


def test_a_gap_is_out_of_order_and_changes_nothing(leader: Leader) -> None:
    leader.append(header(0, n=2))
    with pytest.raises(OutOfOrderSequenceError) as exc:
        leader.append(header(3))
    assert exc.value.code is ErrorCode.out_of_order_sequence_number
    assert "3 (incoming seq. number), 1 (current end sequence number)" in str(exc.value)
    assert leader.end == 2
    assert leader.append(header(2)) == 2


def test_a_partial_overlap_is_not_a_duplicate(leader: Leader) -> None:
    leader.append(header(0, n=4))
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(header(0, n=2))


def test_an_older_epoch_is_fenced(leader: Leader) -> None:
    leader.append(header(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError) as exc:
        leader.append(header(1, epoch=2))
    assert exc.value.code is ErrorCode.invalid_producer_epoch
    # Even a batch that would duplicate one of the old epoch's.
    with pytest.raises(InvalidProducerEpochError):
        leader.append(header(0, epoch=2))


def test_a_new_epoch_starts_at_sequence_zero(leader: Leader) -> None:
    leader.append(header(0, n=5))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        leader.append(header(5, epoch=1))
    assert leader.append(header(0, epoch=1)) == 5
    entry = leader.state.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 1
    assert [b.last_seq for b in entry.batches] == [0], "the old epoch's batches are forgotten"
    # The old epoch's batches are no longer duplicates: they are fenced.
    with pytest.raises(InvalidProducerEpochError):
        leader.append(header(0, n=5))


def test_an_unknown_producer_may_start_anywhere(leader: Leader) -> None:
    """KIP-360: the state may have expired, so a producer's first batch may have any sequence."""
    assert leader.append(header(42, epoch=7)) == 0
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(header(44, epoch=7))
    assert leader.append(header(43, epoch=7)) == 1


def test_a_producer_id_without_a_sequence_is_an_invalid_record(leader: Leader) -> None:
    with pytest.raises(InvalidProducerRecordError) as exc:
        leader.append(header(-1))
    assert exc.value.code is ErrorCode.invalid_record


def test_batches_without_a_producer_id_are_ignored(leader: Leader) -> None:
    leader.append(header(-1, pid=-1, epoch=-1))
    assert leader.state.is_empty
    assert leader.state.map_end_offset == 1


def test_clients_may_not_write_control_batches(leader: Leader) -> None:
    leader.append(header(0))
    with pytest.raises(KafkaApiError) as exc:
        leader.append(header(-1, pid=-1, epoch=-1, attributes=CONTROL_MASK))
    assert exc.value.code is ErrorCode.invalid_record
    with pytest.raises(KafkaApiError) as exc:
        leader.append(header(-1, attributes=CONTROL_MASK | TRANSACTIONAL_MASK))
    assert exc.value.code is ErrorCode.invalid_record
    assert leader.end == 1


def test_one_request_checks_its_batches_in_a_chain(leader: Leader) -> None:
    assert leader.append(header(0, n=2), header(2, n=3), header(0, pid=7)) == 0
    assert leader.end == 6
    # A gap in the second batch refuses the whole request, the good first batch included.
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(header(5), header(7))
    assert leader.end == 6
    entry = leader.state.last_entry(PID)
    assert entry is not None and entry.last_seq == 4


def test_sequences_wrap_after_int32_max(leader: Leader) -> None:
    leader.append(header(INT32_MAX - 1, n=2))
    assert leader.append(header(0)) == 2
    assert leader.append(header(INT32_MAX - 1, n=2)) == 0, "still recognised as a retry"


def test_log_append_time_is_what_the_state_remembers(leader: Leader) -> None:
    leader.append(header(0, ts=5), log_append_time=99)
    entry = leader.state.last_entry(PID)
    assert entry is not None and entry.last_timestamp == 99


def test_replicated_batches_are_taken_without_checks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = ProducerStateManager(tmp_path, "t-0")
    state.append_replicated([header(0, n=2, epoch=5, base_offset=0)], 2)
    state.append_replicated([header(10, epoch=5, base_offset=2)], 3)  # a gap: the leader's call
    state.append_replicated([header(0, epoch=4, base_offset=3)], 4)  # an older epoch: warned
    assert "smaller than the last seen epoch 5" in caplog.text
    entry = state.last_entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 4 and entry.last_data_offset == 3
    assert state.map_end_offset == 4


def test_idle_producers_expire_by_their_last_batch_timestamp(leader: Leader) -> None:
    leader.append(header(0, ts=1_000))
    leader.append(header(0, pid=8, ts=5_000))
    assert leader.state.remove_expired_producers(now_ms=6_000, expiration_ms=5_000) == 1
    assert leader.state.last_entry(PID) is None
    assert leader.state.last_entry(8) is not None
    # Once expired, the producer is unknown: any sequence is taken (KIP-360).
    assert leader.append(header(1)) == 2


def test_entry_equality_and_copy() -> None:
    entry = ProducerStateEntry(1, 2, [BatchMetadata(4, 10, 1, 7)], 7)
    twin = entry.copy()
    assert twin == entry and twin is not entry
    twin.add_batch(2, 5, 11, 0, 8)
    assert twin != entry and len(entry.batches) == 1


# -- property: whatever the network does, each batch lands once, in order ------------------

WINDOW = 5  # a producer's requests in flight per partition, at most


@st.composite
def schedules(draw: st.DrawFn) -> tuple[int, list[tuple[int, bool]]]:
    batches = draw(st.integers(min_value=1, max_value=30))
    steps = draw(
        st.lists(st.tuples(st.integers(0, WINDOW - 1), st.booleans()), min_size=1, max_size=120)
    )
    return batches, steps


def run_producer(
    leader: Leader, batches: int, steps: list[tuple[int, bool]], sizes: list[int]
) -> dict[int, int]:
    """A producer with up to five batches in flight, each sent (and sent again) whenever the
    schedule says, its answer lost when the schedule says; then everything retried in order
    until acknowledged.  Returns the offset acknowledged for each batch.

    The first batch arrives first: a producer the partition does not know yet may start at
    any sequence (KIP-360), so a later batch overtaking it would be taken.  A producer's one
    connection to the leader keeps its first sends in order; this models what retries,
    lost answers and refused batches do after that.
    """
    first_seq = [sum(sizes[:i]) for i in range(batches)]
    acked: dict[int, int] = {}
    oldest = 0

    def send(i: int, lost: bool) -> None:
        try:
            offset = leader.append(header(first_seq[i], n=sizes[i]))
        except OutOfOrderSequenceError:
            return  # the producer retries later
        if not lost:
            assert acked.setdefault(i, offset) == offset, "a retry got a different offset"

    send(0, steps[0][1])
    for pick, lost in steps[1:]:
        while oldest in acked:
            oldest += 1
        window = [i for i in range(oldest, min(oldest + WINDOW, batches))]
        if window:
            send(window[pick % len(window)], lost)
    for i in range(batches):
        send(i, False)  # in order, nothing lost: one attempt each must do
        assert i in acked, f"batch {i} is refused when retried in order"
    return acked


@settings(max_examples=300, deadline=None)
@given(schedules(), st.lists(st.integers(1, 4), min_size=30, max_size=30))
def test_any_interleaving_of_retries_leaves_each_batch_once_in_order(
    tmp_path_factory: pytest.TempPathFactory,
    schedule: tuple[int, list[tuple[int, bool]]],
    sizes: list[int],
) -> None:
    batches, steps = schedule
    leader = Leader(tmp_path_factory.mktemp("p"))
    acked = run_producer(leader, batches, steps, sizes)
    expected = []
    seq = 0
    for i in range(batches):
        expected.append((PID, seq, seq + sizes[i] - 1))
        seq += sizes[i]
    assert leader.log == expected
    offsets = [sum(sizes[:i]) for i in range(batches)]
    assert [acked[i] for i in range(batches)] == offsets
