"""`samsa topics`: create, list, describe, alter and delete topics on any Kafka cluster."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
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
    parse_pairs,
    print_json,
)

topics_app = typer.Typer(
    name="topics",
    help="Create, list, describe, alter and delete topics.",
    no_args_is_help=True,
)

ConfigOpt = Annotated[
    list[str] | None,
    typer.Option("--config", "-c", metavar="KEY=VALUE", help="A topic config to set (repeatable)."),
]

_ADMIN_TIMEOUTS = {"request_timeout": REQUEST_TIMEOUT, "operation_timeout": REQUEST_TIMEOUT}


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")


def is_internal(name: str) -> bool:
    # Kafka's own internal topics (__consumer_offsets, __transaction_state) all start so.
    return name.startswith("__")


def _missing(names: list[str], md: ClusterMetadata) -> list[str]:
    return [name for name in names if name not in md.topics]


def _fail_missing(missing: list[str]) -> None:
    if len(missing) == 1:
        fail(f"topic '{missing[0]}' does not exist")
    if missing:
        fail("topics " + ", ".join(f"'{n}'" for n in missing) + " do not exist")


@topics_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The topic's name.")],
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", "-p", min=1, help="Partition count (broker default)."),
    ] = None,
    replication_factor: Annotated[
        int | None,
        typer.Option(
            "--replication-factor", "-r", min=1, help="Replicas per partition (broker default)."
        ),
    ] = None,
    config: ConfigOpt = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed if the topic already exists.")
    ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Create a topic."""
    configs = parse_pairs(config, "--config")
    cluster, admin, md = connect(bootstrap, properties)
    if name in md.topics and if_not_exists:
        typer.echo(f"Topic '{name}' already exists.")
        return
    topic = NewTopic(
        name,
        num_partitions=partitions if partitions is not None else -1,
        replication_factor=replication_factor if replication_factor is not None else -1,
        config=configs,
    )
    future = admin.create_topics([topic], **_ADMIN_TIMEOUTS)[name]
    try:
        future.result()
    except KafkaException as exc:
        err = exc.args[0]
        if if_not_exists and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            typer.echo(f"Topic '{name}' already exists.")
            return
        cluster.fail_with(err, f"create topic '{name}'", topic=name)
    detail = []
    if partitions is not None:
        detail.append(f"{partitions} partition{'s' if partitions != 1 else ''}")
    if replication_factor is not None:
        detail.append(f"replication factor {replication_factor}")
    typer.echo(f"Created topic '{name}'" + (f" ({', '.join(detail)})." if detail else "."))


@topics_app.command("list")
def list_topics(
    internal: Annotated[
        bool, typer.Option("--internal", help="Include internal topics (names starting __).")
    ] = False,
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """List topics with their partition counts."""
    _, _, md = connect(bootstrap, properties)
    rows = []
    for name in sorted(md.topics):
        if is_internal(name) and not internal:
            continue
        parts = md.topics[name].partitions
        first = parts.get(0) or next(iter(parts.values()), None)
        rows.append(
            {
                "name": name,
                "partitions": len(parts),
                "replication_factor": len(first.replicas) if first is not None else 0,
                "internal": is_internal(name),
            }
        )
    if output is Output.json:
        print_json(rows)
        return
    if not rows:
        typer.echo("No topics.", err=True)
        return
    table = Table("Topic", "Partitions", "Replication factor")
    for row in rows:
        table.add_row(str(row["name"]), str(row["partitions"]), str(row["replication_factor"]))
    console().print(table)


def _node(node: Any) -> int | None:
    if node is None:
        return None
    node_id = node if isinstance(node, int) else node.id
    return None if node_id < 0 else int(node_id)


def _partitions_from_description(description: Any) -> list[dict[str, Any]]:
    return [
        {
            "partition": p.id,
            "leader": _node(p.leader),
            "replicas": [_node(n) for n in p.replicas],
            "isr": [_node(n) for n in p.isr],
        }
        for p in sorted(description.partitions, key=lambda p: p.id)
    ]


def _partitions_from_metadata(md: ClusterMetadata, name: str) -> list[dict[str, Any]]:
    parts = md.topics[name].partitions
    return [
        {
            "partition": p.id,
            "leader": _node(p.leader),
            "replicas": list(p.replicas),
            "isr": list(p.isrs),
        }
        for p in sorted(parts.values(), key=lambda p: p.id)
    ]


def _non_default(entries: dict[str, ConfigEntry]) -> dict[str, str | None]:
    """Configs set on the topic itself, as kafka-topics.sh shows them."""
    picked = {}
    for key, entry in sorted(entries.items()):
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG or (
            entry.source == ConfigSource.UNKNOWN_CONFIG and not entry.is_default
        ):
            picked[key] = None if entry.is_sensitive else entry.value
    return picked


def _describe(
    cluster: Cluster, admin: AdminClient, md: ClusterMetadata, names: list[str]
) -> list[dict[str, Any]]:
    descriptions: dict[str, Any] = {}
    if names:
        futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT)
        for name, future in futures.items():
            try:
                descriptions[name] = future.result()
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    cluster.fail_with(err, f"describe topic '{name}'", topic=name)
                # Older brokers cannot describe topics by this API: the metadata still
                # has everything but the topic id.
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    configs: dict[str, dict[str, str | None]] = {}
    if resources:
        for resource, future in admin.describe_configs(
            resources, request_timeout=REQUEST_TIMEOUT
        ).items():
            try:
                configs[resource.name] = _non_default(future.result())
            except KafkaException as exc:
                cluster.fail_with(exc, f"describe configs of '{resource.name}'", resource.name)
    result = []
    for name in names:
        desc = descriptions.get(name)
        if desc is not None:
            partitions = _partitions_from_description(desc)
            topic_id = str(desc.topic_id) if desc.topic_id is not None else None
        else:
            partitions = _partitions_from_metadata(md, name)
            topic_id = None
        result.append(
            {
                "name": name,
                "topic_id": topic_id,
                "internal": desc.is_internal if desc is not None else is_internal(name),
                "partition_count": len(partitions),
                "replication_factor": len(partitions[0]["replicas"]) if partitions else 0,
                "configs": configs.get(name, {}),
                "partitions": partitions,
            }
        )
    return result


def _ids(nodes: list[int | None]) -> str:
    return ",".join("none" if n is None else str(n) for n in nodes)


@topics_app.command("describe")
def describe(
    names: Annotated[
        list[str] | None, typer.Argument(help="Topics to describe (default: all).")
    ] = None,
    internal: Annotated[
        bool, typer.Option("--internal", help="With no names, include internal topics.")
    ] = False,
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Show partitions, leaders, replicas, ISR, topic id and the topic's own configs."""
    cluster, admin, md = connect(bootstrap, properties)
    wanted = list(dict.fromkeys(names or ()))
    if wanted:
        _fail_missing(_missing(wanted, md))
    else:
        wanted = sorted(n for n in md.topics if internal or not is_internal(n))
    topics = _describe(cluster, admin, md, wanted)
    if output is Output.json:
        print_json(topics)
        return
    if not topics:
        typer.echo("No topics.", err=True)
        return
    out = console()
    for i, topic in enumerate(topics):
        if i:
            out.print()
        out.print(
            f"[bold]{topic['name']}[/bold]"
            + (f"  id={topic['topic_id']}" if topic["topic_id"] else "")
            + f"  partitions={topic['partition_count']}"
            + f"  replication-factor={topic['replication_factor']}"
            + ("  internal" if topic["internal"] else ""),
            markup=True,
            soft_wrap=True,
        )
        if topic["configs"]:
            pairs = (
                f"{k}={'(sensitive)' if v is None else v}" for k, v in topic["configs"].items()
            )
            out.print("configs: " + ", ".join(pairs), markup=False, soft_wrap=True)
        table = Table("Partition", "Leader", "Replicas", "ISR")
        for p in topic["partitions"]:
            leader = "none" if p["leader"] is None else str(p["leader"])
            table.add_row(str(p["partition"]), leader, _ids(p["replicas"]), _ids(p["isr"]))
        out.print(table)


@topics_app.command("delete")
def delete(
    names: Annotated[list[str], typer.Argument(help="Topics to delete.")],
    if_exists: Annotated[
        bool, typer.Option("--if-exists", help="Ignore topics that do not exist.")
    ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Delete topics and all their records."""
    cluster, admin, md = connect(bootstrap, properties)
    wanted = list(dict.fromkeys(names))
    missing = _missing(wanted, md)
    if not if_exists:
        # All or nothing on names: a typo must not leave half of the list deleted.
        _fail_missing(missing)
    wanted = [n for n in wanted if n not in missing]
    if not wanted:
        typer.echo("Nothing to delete.")
        return
    failed = False
    for name, future in admin.delete_topics(wanted, **_ADMIN_TIMEOUTS).items():
        try:
            future.result()
        except KafkaException as exc:
            err = exc.args[0]
            if if_exists and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if len(wanted) == 1:
                cluster.fail_with(err, f"delete topic '{name}'", topic=name)
            typer.echo(f"error: cannot delete topic '{name}': {err.str()}", err=True)
            failed = True
            continue
        typer.echo(f"Deleted topic '{name}'.")
    if failed:
        raise typer.Exit(1)


@topics_app.command("alter")
def alter(
    name: Annotated[str, typer.Argument(help="The topic to change.")],
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", "-p", min=1, help="New, larger, partition count."),
    ] = None,
    config: ConfigOpt = None,
    delete_config: Annotated[
        list[str] | None,
        typer.Option(
            "--delete-config", metavar="KEY", help="A topic config to reset (repeatable)."
        ),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Add partitions and change or reset topic configs."""
    to_set = parse_pairs(config, "--config")
    to_delete = list(dict.fromkeys(delete_config or ()))
    if partitions is None and not to_set and not to_delete:
        raise typer.BadParameter(
            "nothing to change: give --partitions, --config or --delete-config",
            param_hint="options",
        )
    both = set(to_set) & set(to_delete)
    if both:
        raise typer.BadParameter(f"both set and deleted: {', '.join(sorted(both))}")
    cluster, admin, md = connect(bootstrap, properties)
    _fail_missing(_missing([name], md))
    if to_set or to_delete:
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in to_set.items()
        ] + [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        for future in admin.incremental_alter_configs(
            [resource], request_timeout=REQUEST_TIMEOUT
        ).values():
            try:
                future.result()
            except KafkaException as exc:
                cluster.fail_with(exc, f"change configs of topic '{name}'", topic=name)
        changes = [f"set {k}={v}" for k, v in to_set.items()] + [f"reset {k}" for k in to_delete]
        typer.echo(f"Updated topic '{name}': {', '.join(changes)}.")
    if partitions is not None:
        current = len(md.topics[name].partitions)
        if partitions == current:
            typer.echo(f"Topic '{name}' already has {current} partitions.")
            return
        futures = admin.create_partitions([NewPartitions(name, partitions)], **_ADMIN_TIMEOUTS)
        for future in futures.values():
            try:
                future.result()
            except KafkaException as exc:
                cluster.fail_with(exc, f"change the partitions of topic '{name}'", topic=name)
        typer.echo(f"Topic '{name}' now has {partitions} partitions (was {current}).")
