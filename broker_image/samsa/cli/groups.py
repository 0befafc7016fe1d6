"""`samsa groups`: list, describe and delete consumer groups, and reset their committed
offsets, on any Kafka cluster (through confluent-kafka's admin client)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, NoReturn

import typer
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConsumerGroupDescription, OffsetSpec
from rich.table import Table

from samsa.cli.errors import fail
from samsa.cli.kafka import (
    DEFAULT_BOOTSTRAP,
    REQUEST_TIMEOUT,
    Bootstrap,
    Cluster,
    Output,
    OutputOpt,
    Properties,
    connect,
    console,
    print_json,
)
from samsa.cli.offset_reset import (
    Partition,
    PlannedReset,
    ResetTarget,
    choose_target,
    lag,
    parse_topic,
    plan_reset,
)

groups_app = typer.Typer(
    name="groups",
    help="List, describe and delete consumer groups; reset their committed offsets.",
    no_args_is_help=True,
)

USAGE = 2  # the exit code of a command line that cannot be right

# Kafka's own names for the group states, as kafka-consumer-groups.sh prints them.
STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
INACTIVE = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD}


def register(app: typer.Typer) -> None:
    app.add_typer(groups_app, name="groups")


def state_name(state: Any) -> str:
    """Kafka's name of a ConsumerGroupState."""
    return STATE_NAMES.get(state, str(state)) if state is not None else "Unknown"


def _group_problem(exc: KafkaException, group: str) -> str | None:
    """The one-line wording of a group error a person can act on; None for the others."""
    err = exc.args[0]
    if isinstance(err, KafkaError):
        if err.code() == KafkaError.GROUP_ID_NOT_FOUND:
            return f"group '{group}' does not exist"
        if err.code() == KafkaError.NON_EMPTY_GROUP:
            return f"group '{group}' has active members: stop them first"
        if err.code() == KafkaError.INVALID_GROUP_ID:
            return f"'{group}' is not a valid group id"
    return None


def _group_failure(cluster: Cluster, exc: KafkaException, group: str, doing: str) -> NoReturn:
    problem = _group_problem(exc, group)
    if problem is None:
        cluster.fail_with(exc, doing)
    fail(problem)


# -- reads ------------------------------------------------------------------------------------


def _describe_group(cluster: Cluster, admin: AdminClient, group: str) -> ConsumerGroupDescription:
    future = admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT)[group]
    try:
        return future.result()
    except KafkaException as exc:
        _group_failure(cluster, exc, group, f"describe group '{group}'")


def _committed(cluster: Cluster, admin: AdminClient, group: str) -> dict[Partition, int]:
    """Every committed offset of the group."""
    request = [ConsumerGroupTopicPartitions(group)]
    future = admin.list_consumer_group_offsets(request, request_timeout=REQUEST_TIMEOUT)[group]
    try:
        result = future.result()
    except KafkaException as exc:
        _group_failure(cluster, exc, group, f"read the offsets of group '{group}'")
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions or ()
        if tp.error is None and tp.offset >= 0
    }


def list_offsets(
    cluster: Cluster, admin: AdminClient, partitions: Iterable[Partition], spec: OffsetSpec
) -> dict[Partition, int | None]:
    """ListOffsets for each partition; None where the partition answers with an error."""
    wanted = {TopicPartition(t, p): spec for t, p in sorted(set(partitions))}
    if not wanted:
        return {}
    out: dict[Partition, int | None] = {}
    for tp, future in admin.list_offsets(wanted, request_timeout=REQUEST_TIMEOUT).items():
        try:
            out[(tp.topic, tp.partition)] = future.result().offset
        except KafkaException as exc:
            err = exc.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                out[(tp.topic, tp.partition)] = None  # a deleted topic the group still has
                continue
            cluster.fail_with(exc, f"read the offsets of {tp.topic}-{tp.partition}")
    return out


def _exists(description: ConsumerGroupDescription, committed: dict[Partition, int]) -> bool:
    # Brokers answer Dead, with no members, for a group they do not know.
    return bool(description.state != ConsumerGroupState.DEAD or description.members or committed)


# -- list -------------------------------------------------------------------------------------


@groups_app.command("list")
def list_groups(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help="Only groups in this state (repeatable), e.g. Stable."),
    ] = None,
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """List consumer groups with their states."""
    wanted = {s.lower() for s in state or ()}
    unknown = wanted - {name.lower() for name in STATE_NAMES.values()}
    if unknown:
        names = ", ".join(n for n in STATE_NAMES.values() if n != "Unknown")
        fail(f"no group state {sorted(unknown)[0]!r}: one of {names}", USAGE)
    cluster, admin, _ = connect(bootstrap, properties)
    try:
        result = admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT).result()
    except KafkaException as exc:
        cluster.fail_with(exc, "list groups")
    rows = sorted(
        (
            {"group": g.group_id, "state": state_name(g.state)}
            for g in result.valid
            if not wanted or state_name(g.state).lower() in wanted
        ),
        key=lambda r: r["group"],
    )
    if output is Output.json:
        print_json(rows)
        return
    if not rows:
        typer.echo("No groups.", err=True)
        return
    table = Table("Group", "State")
    for row in rows:
        table.add_row(row["group"], row["state"])
    console().print(table)


# -- describe ---------------------------------------------------------------------------------


def group_info(cluster: Cluster, admin: AdminClient, group: str) -> dict[str, Any]:
    description = _describe_group(cluster, admin, group)
    committed = _committed(cluster, admin, group)
    if not _exists(description, committed):
        fail(f"group '{group}' does not exist")
    owner: dict[Partition, str] = {}
    members = []
    for m in sorted(description.members, key=lambda m: m.member_id):
        assigned = [(tp.topic, tp.partition) for tp in m.assignment.topic_partitions or ()]
        owner.update(dict.fromkeys(assigned, m.member_id))
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": [{"topic": t, "partition": p} for t, p in sorted(assigned)],
            }
        )
    partitions = sorted(set(committed) | set(owner))
    log_end = list_offsets(cluster, admin, partitions, OffsetSpec.latest())
    coordinator = description.coordinator
    return {
        "group": group,
        "state": state_name(description.state),
        "assignor": description.partition_assignor or None,
        "coordinator": None
        if coordinator is None
        else {"id": coordinator.id, "host": coordinator.host, "port": coordinator.port},
        "members": members,
        "offsets": [
            {
                "topic": t,
                "partition": p,
                "committed_offset": committed.get((t, p)),
                "log_end_offset": log_end.get((t, p)),
                "lag": lag(committed.get((t, p)), log_end.get((t, p))),
                "member_id": owner.get((t, p)),
            }
            for t, p in partitions
        ],
    }


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _print_group(info: dict[str, Any]) -> None:
    out = console()
    coordinator = info["coordinator"]
    where = (
        f"  coordinator={coordinator['id']} ({coordinator['host']}:{coordinator['port']})"
        if coordinator
        else ""
    )
    out.print(
        f"[bold]{info['group']}[/bold]  state={info['state']}"
        + (f"  assignor={info['assignor']}" if info["assignor"] else "")
        + f"  members={len(info['members'])}"
        + where,
        markup=True,
        soft_wrap=True,
    )
    if info["members"]:
        members = Table("Member", "Instance", "Client", "Host", "Partitions")
        for m in info["members"]:
            assigned = ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"])
            members.add_row(
                m["member_id"], _dash(m["group_instance_id"]), m["client_id"], m["host"], assigned
            )
        out.print(members)
    if info["offsets"]:
        offsets = Table("Topic", "Partition", "Committed", "Log end", "Lag", "Member")
        for o in info["offsets"]:
            offsets.add_row(
                o["topic"],
                str(o["partition"]),
                _dash(o["committed_offset"]),
                _dash(o["log_end_offset"]),
                _dash(o["lag"]),
                _dash(o["member_id"]),
            )
        out.print(offsets)
    else:
        out.print("No committed offsets and no assigned partitions.")


@groups_app.command("describe")
def describe(
    names: Annotated[list[str], typer.Argument(help="Groups to describe.")],
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Show members and assignments, and per partition the committed offset, the log end
    offset and the lag."""
    cluster, admin, _ = connect(bootstrap, properties)
    groups = [group_info(cluster, admin, g) for g in dict.fromkeys(names)]
    if output is Output.json:
        print_json(groups)
        return
    for i, info in enumerate(groups):
        if i:
            console().print()
        _print_group(info)


# -- delete -----------------------------------------------------------------------------------


@groups_app.command("delete")
def delete(
    names: Annotated[list[str], typer.Argument(help="Groups to delete (empty groups only).")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Delete groups that have no active members, with their committed offsets."""
    cluster, admin, _ = connect(bootstrap, properties)
    wanted = list(dict.fromkeys(names))
    futures = admin.delete_consumer_groups(wanted, request_timeout=REQUEST_TIMEOUT)
    failed = False
    for name in wanted:
        try:
            futures[name].result()
        except KafkaException as exc:
            if len(wanted) == 1:
                _group_failure(cluster, exc, name, f"delete group '{name}'")
            problem = _group_problem(exc, name) or f"cannot delete group '{name}': {exc}"
            typer.echo(f"error: {problem}", err=True)
            failed = True
            continue
        typer.echo(f"Deleted group '{name}'.")
    if failed:
        raise typer.Exit(1)


# -- reset-offsets ----------------------------------------------------------------------------


def _partitions_to_reset(
    md: ClusterMetadata,
    topics: list[str],
    all_topics: bool,
    committed: dict[Partition, int],
    group: str,
) -> list[Partition]:
    if all_topics == bool(topics):
        fail("name the topics with --topic, or give --all-topics (not both)", USAGE)
    if all_topics:
        if not committed:
            fail(f"group '{group}' has no committed offsets: name the topics with --topic")
        # As kafka-consumer-groups.sh: the partitions with a commit, less deleted topics.
        return sorted(tp for tp in committed if tp[0] in md.topics)
    try:
        specs = [parse_topic(t) for t in topics]
    except ValueError as exc:
        fail(str(exc), USAGE)
    chosen: list[Partition] = []
    for name, partitions in specs:
        if name not in md.topics:
            fail(f"topic '{name}' does not exist")
        present = sorted(md.topics[name].partitions)
        for p in partitions or present:
            if p not in present:
                fail(f"topic '{name}' has no partition {p} (it has {len(present)})")
            chosen.append((name, p))
    return chosen


def _plan(
    cluster: Cluster,
    admin: AdminClient,
    partitions: list[Partition],
    target: ResetTarget,
    committed: dict[Partition, int],
) -> list[PlannedReset]:
    def ends(spec: OffsetSpec) -> dict[Partition, int]:
        found = list_offsets(cluster, admin, partitions, spec)
        missing = [tp for tp, o in found.items() if o is None]
        if missing:
            fail(f"topic '{missing[0][0]}' does not exist")
        return {tp: o for tp, o in found.items() if o is not None}

    by_time = None
    if target.needs_times:
        assert target.value is not None  # a datetime target carries its epoch milliseconds
        by_time = ends(OffsetSpec.for_timestamp(target.value))
    return plan_reset(
        partitions,
        target,
        committed,
        ends(OffsetSpec.earliest()),
        ends(OffsetSpec.latest()),
        by_time,
    )


def plan_group_reset(
    cluster: Cluster,
    admin: AdminClient,
    md: ClusterMetadata,
    group: str,
    topics: list[str],
    all_topics: bool,
    target: ResetTarget,
) -> list[PlannedReset]:
    """Where a reset would move an inactive group's committed offsets of `topics` (each
    `TOPIC[:P,P...]`), or of every topic it has offsets for; fails for an active group, whose
    members would overwrite the new offsets."""
    description = _describe_group(cluster, admin, group)
    if description.state not in INACTIVE or description.members:
        count = len(description.members)
        fail(
            f"group '{group}' is active ({state_name(description.state)}, {count} "
            f"member{'s' if count != 1 else ''}): stop its consumers before resetting its offsets"
        )
    committed = _committed(cluster, admin, group)
    partitions = _partitions_to_reset(md, topics, all_topics, committed, group)
    if not partitions:
        fail(f"group '{group}' has offsets only for topics that no longer exist")
    return _plan(cluster, admin, partitions, target, committed)


def apply_reset(cluster: Cluster, admin: AdminClient, group: str, plan: list[PlannedReset]) -> None:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(r.topic, r.partition, r.new) for r in plan]
    )
    future = admin.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT)[group]
    try:
        result = future.result()
    except KafkaException as exc:
        err = exc.args[0]
        if isinstance(err, KafkaError) and err.code() in (
            KafkaError.UNKNOWN_MEMBER_ID,
            KafkaError.REBALANCE_IN_PROGRESS,
        ):
            fail(f"group '{group}' became active: stop its members and try again")
        _group_failure(cluster, exc, group, f"reset the offsets of group '{group}'")
    errors = [tp for tp in result.topic_partitions or () if tp.error is not None]
    if errors:
        first = errors[0]
        fail(
            f"cannot reset {first.topic}-{first.partition} of group '{group}': {first.error.str()}"
        )


@groups_app.command("reset-offsets")
def reset_offsets(
    group: Annotated[str, typer.Argument(help="The group whose offsets to move.")],
    topic: Annotated[
        list[str] | None,
        typer.Option(
            "--topic",
            "-t",
            metavar="TOPIC[:P,P...]",
            help="A topic, or some of its partitions (repeatable).",
        ),
    ] = None,
    all_topics: Annotated[
        bool,
        typer.Option("--all-topics", help="Every partition the group has committed offsets for."),
    ] = False,
    to_earliest: Annotated[
        bool, typer.Option("--to-earliest", help="To the first offset still in the log.")
    ] = False,
    to_latest: Annotated[
        bool, typer.Option("--to-latest", help="To the log end: skip everything there is.")
    ] = False,
    to_datetime: Annotated[
        str | None,
        typer.Option(
            "--to-datetime",
            metavar="ISO-8601",
            help="To the first record at or after this time (local time if no zone given).",
        ),
    ] = None,
    to_offset: Annotated[
        int | None,
        typer.Option("--to-offset", help="To this offset (moved into the log if outside it)."),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Apply the plan; without it nothing changes.")
    ] = False,
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Move a group's committed offsets; prints the plan, and applies it with --execute.

    The group must have no active members: they would overwrite the new offsets."""
    try:
        target = choose_target(to_earliest, to_latest, to_datetime, to_offset)
    except ValueError as exc:
        fail(str(exc), USAGE)
    cluster, admin, md = connect(bootstrap, properties)
    plan = plan_group_reset(cluster, admin, md, group, list(topic or ()), all_topics, target)
    if execute:
        apply_reset(cluster, admin, group, plan)
    rows = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "current_offset": r.current,
            "new_offset": r.new,
            "note": r.note or None,
        }
        for r in plan
    ]
    if output is Output.json:
        print_json({"group": group, "executed": execute, "partitions": rows})
    else:
        table = Table("Topic", "Partition", "Current offset", "New offset", "Note")
        for r in plan:
            table.add_row(r.topic, str(r.partition), _dash(r.current), str(r.new), r.note)
        console().print(table)
    where = target.describe()
    if execute:
        typer.echo(f"Reset {len(plan)} partition(s) of group '{group}' to {where}.", err=True)
    else:
        typer.echo(
            f"Dry run: nothing changed. Add --execute to reset group '{group}' to {where}.",
            err=True,
        )
