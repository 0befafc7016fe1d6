"""`samsa transactions`: list, describe and abort transactions on any Kafka cluster, as
kafka-transactions.sh does (ListTransactions on every broker, FindCoordinator and
DescribeTransactions, and WriteTxnMarkers to a partition's leader to abort a hanging one).

librdkafka has no admin API for these, so they go through Samsa's own small client; brokers
are found through the admin client's metadata. The abort names the hanging transaction by its
start offset (DescribeProducers finds its producer) or by its producer id, epoch and
coordinator epoch, as ``kafka-transactions.sh abort`` does.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

import typer
from confluent_kafka.admin import ClusterMetadata
from rich.table import Table

from samsa.cli.errors import fail
from samsa.cli.kafka import (
    DEFAULT_BOOTSTRAP,
    REQUEST_TIMEOUT,
    Bootstrap,
    Output,
    OutputOpt,
    Properties,
    connect,
    console,
    print_json,
)
from samsa.client import BrokerConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type

T = TypeVar("T")

FIND_COORDINATOR, FIND_COORDINATOR_VERSION = 10, 4
WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION = 27, 1
DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_VERSION = 61, 0
DESCRIBE_TRANSACTIONS, DESCRIBE_TRANSACTIONS_VERSION = 65, 0
LIST_TRANSACTIONS, LIST_TRANSACTIONS_VERSION = 66, 0
TRANSACTION_KEY_TYPE = 1

transactions_app = typer.Typer(
    name="transactions",
    help="Transactions: list, describe, abort a hanging one.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(transactions_app, name="transactions")


def _brokers(md: ClusterMetadata) -> dict[int, tuple[str, int]]:
    return {b.id: (str(b.host), b.port) for b in md.brokers.values()}


async def _request(
    address: tuple[str, int], api_key: int, version: int, body: dict[str, Any]
) -> Any:
    conn = BrokerConnection(address[0], address[1], client_id="samsa-cli")
    await conn.connect(REQUEST_TIMEOUT)
    try:
        return await conn.request(
            api_key, version, build(request_type(api_key, version), body), REQUEST_TIMEOUT
        )
    finally:
        await conn.aclose()


def _run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(make())
    except (OSError, TimeoutError) as exc:
        fail(f"cannot reach a broker: {exc!r}")


def _error(code: Any) -> ErrorCode:
    return ErrorCode(int(code))


# -- list ------------------------------------------------------------------------------------


@transactions_app.command("list")
def list_transactions(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help="Only transactions in this state (repeatable)."),
    ] = None,
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """List the transactional ids of every broker's transaction coordinator."""
    _, _, md = connect(bootstrap, properties)
    brokers = _brokers(md)

    async def ask() -> list[tuple[int, Any]]:
        answers = await asyncio.gather(
            *(
                _request(
                    address,
                    LIST_TRANSACTIONS,
                    LIST_TRANSACTIONS_VERSION,
                    {"state_filters": list(state or ()), "producer_id_filters": []},
                )
                for address in brokers.values()
            )
        )
        return list(zip(brokers, answers, strict=True))

    rows = []
    for broker_id, response in _run(ask):
        error = _error(response.error_code)
        if error is not ErrorCode.none:
            fail(f"broker {broker_id} cannot list its transactions: {error.name.upper()}")
        if response.unknown_state_filters:
            fail(f"no transaction state {response.unknown_state_filters[0]!r}")
        for t in response.transaction_states:
            rows.append(
                {
                    "transactional_id": t.transactional_id,
                    "coordinator": broker_id,
                    "producer_id": t.producer_id,
                    "state": t.transaction_state,
                }
            )
    rows.sort(key=lambda r: r["transactional_id"])
    if output is Output.json:
        print_json(rows)
        return
    table = Table("TRANSACTIONAL ID", "COORDINATOR", "PRODUCER ID", "STATE", box=None)
    for r in rows:
        table.add_row(
            r["transactional_id"], str(r["coordinator"]), str(r["producer_id"]), r["state"]
        )
    console().print(table)


# -- describe --------------------------------------------------------------------------------


@transactions_app.command("describe")
def describe(
    transactional_id: Annotated[str, typer.Argument(help="The transactional id.")],
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Show a transactional id's producer, state, timeout and partitions."""
    _, _, md = connect(bootstrap, properties)
    brokers = _brokers(md)

    async def ask() -> tuple[int, Any]:
        any_broker = next(iter(brokers.values()))
        found = await _request(
            any_broker,
            FIND_COORDINATOR,
            FIND_COORDINATOR_VERSION,
            {"key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": [transactional_id]},
        )
        coordinator = found.coordinators[0]
        error = _error(coordinator.error_code)
        if error is not ErrorCode.none:
            fail(f"no coordinator for {transactional_id!r}: {error.name.upper()}")
        response = await _request(
            (coordinator.host, coordinator.port),
            DESCRIBE_TRANSACTIONS,
            DESCRIBE_TRANSACTIONS_VERSION,
            {"transactional_ids": [transactional_id]},
        )
        return coordinator.node_id, response.transaction_states[0]

    coordinator_id, t = _run(ask)
    error = _error(t.error_code)
    if error is not ErrorCode.none:
        fail(f"cannot describe {transactional_id!r}: {error.name.upper()}")
    start = t.transaction_start_time
    start_ms = int(start.timestamp() * 1000) if isinstance(start, datetime.datetime) else int(start)
    timeout = t.transaction_timeout
    info = {
        "transactional_id": transactional_id,
        "coordinator": coordinator_id,
        "state": t.transaction_state,
        "producer_id": t.producer_id,
        "producer_epoch": t.producer_epoch,
        "transaction_timeout_ms": int(timeout.total_seconds() * 1000)
        if isinstance(timeout, datetime.timedelta)
        else int(timeout),
        "transaction_start_time_ms": start_ms,
        "partitions": [f"{tp.topic}-{p}" for tp in t.topics for p in tp.partitions],
    }
    if output is Output.json:
        print_json(info)
        return
    table = Table(box=None, show_header=False)
    for key, value in info.items():
        shown = ", ".join(value) if isinstance(value, list) else str(value)
        table.add_row(key.upper().replace("_", " "), shown)
    console().print(table)


# -- abort -----------------------------------------------------------------------------------


@transactions_app.command("abort")
def abort(
    topic: Annotated[str, typer.Option("--topic", help="The partition's topic.")],
    partition: Annotated[int, typer.Option("--partition", help="The partition.")],
    start_offset: Annotated[
        int | None,
        typer.Option("--start-offset", help="The first offset of the hanging transaction."),
    ] = None,
    producer_id: Annotated[
        int | None, typer.Option("--producer-id", help="The hanging producer.")
    ] = None,
    producer_epoch: Annotated[
        int | None, typer.Option("--producer-epoch", help="Its epoch.")
    ] = None,
    coordinator_epoch: Annotated[
        int | None,
        typer.Option("--coordinator-epoch", help="The coordinator epoch to write with."),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Abort a hanging transaction on one partition: an ABORT marker written by its leader
    (needs ALTER or CLUSTER_ACTION on the cluster). Name it by --start-offset (its producer is
    found with DescribeProducers) or by --producer-id, --producer-epoch and
    --coordinator-epoch, as kafka-transactions.sh abort does."""
    explicit = (producer_id, producer_epoch, coordinator_epoch)
    if (start_offset is not None) == (None not in explicit):
        fail("give --start-offset, or all of --producer-id, --producer-epoch, --coordinator-epoch")
    _, _, md = connect(bootstrap, properties)
    meta = md.topics.get(topic)
    if meta is None or partition not in meta.partitions:
        fail(f"no partition {topic}-{partition}")
    leader = meta.partitions[partition].leader
    found = _brokers(md).get(leader)
    if found is None:
        fail(f"{topic}-{partition} has no leader now")
        return
    address = found
    where = f"{topic}-{partition}"
    if start_offset is not None:
        described = _run(
            lambda: _request(
                address,
                DESCRIBE_PRODUCERS,
                DESCRIBE_PRODUCERS_VERSION,
                {"topics": [{"name": topic, "partition_indexes": [partition]}]},
            )
        )
        p = described.topics[0].partitions[0]
        if _error(p.error_code) is not ErrorCode.none:
            fail(f"cannot describe the producers of {where}: {_error(p.error_code).name.upper()}")
        hanging = [s for s in p.active_producers if s.current_txn_start_offset == start_offset]
        if not hanging:
            fail(f"no open transaction starts at offset {start_offset} of {where}")
        producer_id = hanging[0].producer_id
        producer_epoch = hanging[0].producer_epoch
        coordinator_epoch = max(hanging[0].coordinator_epoch, 0)
    body = {
        "markers": [
            {
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "transaction_result": False,
                "topics": [{"name": topic, "partition_indexes": [partition]}],
                "coordinator_epoch": coordinator_epoch,
            }
        ]
    }
    response = _run(lambda: _request(address, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body))
    for m in response.markers:
        for t in m.topics:
            for p in t.partitions:
                error = _error(p.error_code)
                if error is not ErrorCode.none:
                    fail(f"abort of producer {producer_id} on {where}: {error.name.upper()}")
    console().print(f"Aborted the transaction of producer {producer_id} on {where}.")


# -- find-hanging ----------------------------------------------------------------------------


@transactions_app.command("find-hanging")
def find_hanging(
    max_transaction_timeout: Annotated[
        int,
        typer.Option(
            "--max-transaction-timeout",
            help="Minutes: open transactions older than this are candidates (Kafka: 15).",
        ),
    ] = 15,
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Transactions open on a partition for longer than the maximum transaction timeout that
    their coordinator does not know as ongoing there, as kafka-transactions.sh find-hanging
    finds them: abort each with `samsa transactions abort --start-offset`."""
    _, _, md = connect(bootstrap, properties)
    brokers = _brokers(md)
    by_leader: dict[int, dict[str, list[int]]] = {}
    for name, t in md.topics.items():
        for p, info in t.partitions.items():
            if info.leader in brokers:
                by_leader.setdefault(info.leader, {}).setdefault(name, []).append(p)

    async def ask() -> tuple[list[Any], list[Any]]:
        described = await asyncio.gather(
            *(
                _request(
                    brokers[b],
                    DESCRIBE_PRODUCERS,
                    DESCRIBE_PRODUCERS_VERSION,
                    {"topics": [{"name": n, "partition_indexes": ps} for n, ps in tps.items()]},
                )
                for b, tps in by_leader.items()
            )
        )
        listed = await asyncio.gather(
            *(
                _request(
                    address,
                    LIST_TRANSACTIONS,
                    LIST_TRANSACTIONS_VERSION,
                    {"state_filters": ["Ongoing"], "producer_id_filters": []},
                )
                for address in brokers.values()
            )
        )
        return list(described), list(listed)

    described, listed = _run(ask)
    ongoing = {t.producer_id for r in listed for t in r.transaction_states}
    now_ms = datetime.datetime.now(datetime.UTC).timestamp() * 1000
    limit_ms = max_transaction_timeout * 60_000
    rows = []
    for response in described:
        for t in response.topics:
            for p in t.partitions:
                for s in p.active_producers:
                    if s.current_txn_start_offset < 0 or s.producer_id in ongoing:
                        continue
                    last = s.last_timestamp
                    last_ms = (
                        last.timestamp() * 1000
                        if isinstance(last, datetime.datetime)
                        else float(last)
                    )
                    if now_ms - last_ms < limit_ms:
                        continue
                    rows.append(
                        {
                            "topic": t.name,
                            "partition": p.partition_index,
                            "producer_id": s.producer_id,
                            "producer_epoch": s.producer_epoch,
                            "coordinator_epoch": s.coordinator_epoch,
                            "start_offset": s.current_txn_start_offset,
                            "last_timestamp_ms": int(last_ms),
                        }
                    )
    if output is Output.json:
        print_json(rows)
        return
    table = Table(
        "TOPIC", "PARTITION", "PRODUCER ID", "EPOCH", "START OFFSET", "LAST TIMESTAMP", box=None
    )
    for r in rows:
        table.add_row(
            r["topic"],
            str(r["partition"]),
            str(r["producer_id"]),
            str(r["producer_epoch"]),
            str(r["start_offset"]),
            str(r["last_timestamp_ms"]),
        )
    console().print(table)
