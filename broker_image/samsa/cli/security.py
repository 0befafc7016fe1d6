"""`samsa users` and `samsa acls`: SCRAM credentials and ACLs on any Kafka cluster (through
confluent-kafka's admin client), as kafka-configs.sh --entity-type users and kafka-acls.sh."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Annotated, Any

import typer
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
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

USAGE = 2
users_app = typer.Typer(name="users", help="SCRAM users: set, delete, list.", no_args_is_help=True)
acls_app = typer.Typer(name="acls", help="ACLs: add, remove, list.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")
    app.add_typer(acls_app, name="acls")


def _enum(kind: Any, text: str, option: str) -> Any:
    key = text.strip().upper().replace("-", "_")
    try:
        return kind[key]
    except KeyError:
        names = ", ".join(m.name.lower() for m in kind if m.name not in ("UNKNOWN",))
        fail(f"{option}: no {text!r}; one of {names}", USAGE)


Mechanism = Annotated[
    str, typer.Option("--mechanism", "-m", help="SCRAM-SHA-512 or SCRAM-SHA-256.")
]


@users_app.command("set")
def set_user(
    name: str,
    password: Annotated[str, typer.Option("--password", "-p", prompt=True, hide_input=True)],
    mechanism: Mechanism = "SCRAM-SHA-512",
    iterations: Annotated[int, typer.Option("--iterations")] = 4096,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Add or replace a user's SCRAM credential."""
    mech = _enum(ScramMechanism, mechanism, "--mechanism")
    up = UserScramCredentialUpsertion(
        name, ScramCredentialInfo(mech, iterations), password.encode()
    )
    _alter_credential(bootstrap, properties, up, f"set user {name}")
    console().print(f"user {name}: {mechanism.upper()} set")


def _alter_credential(
    bootstrap: str,
    properties: list[str] | None,
    change: UserScramCredentialAlteration,
    what: str,
) -> None:
    """One AlterUserScramCredentials change, its failure a one-line message."""
    cluster, admin, _ = connect(bootstrap, properties)
    try:
        for future in admin.alter_user_scram_credentials(
            [change], request_timeout=REQUEST_TIMEOUT
        ).values():
            future.result()
    except KafkaException as exc:
        cluster.fail_with(exc, what)


@users_app.command("delete")
def delete_user(
    name: str,
    mechanism: Mechanism = "SCRAM-SHA-512",
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Delete a user's SCRAM credential."""
    mech = _enum(ScramMechanism, mechanism, "--mechanism")
    _alter_credential(
        bootstrap, properties, UserScramCredentialDeletion(name, mech), f"delete user {name}"
    )
    console().print(f"user {name}: {mechanism.upper()} deleted")


@users_app.command("list")
def list_users(
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Users with SCRAM credentials, and their mechanisms and iterations."""
    cluster, admin, _ = connect(bootstrap, properties)
    try:
        every_user = admin.describe_user_scram_credentials(request_timeout=REQUEST_TIMEOUT)
        # Asked for no user in particular, it answers one future for all of them (a dict
        # of futures, one per user, is the answer to a list of users).
        assert isinstance(every_user, Future)
        described: Any = every_user.result()
    except KafkaException as exc:
        cluster.fail_with(exc, "list users")
    rows = [
        {
            "user": user,
            "credentials": [
                {"mechanism": i.mechanism.name.replace("_", "-"), "iterations": i.iterations}
                for i in d.scram_credential_infos
            ],
        }
        for user, d in sorted(described.items())
    ]
    if output is Output.json:
        print_json(rows)
        return
    table = Table("USER", "MECHANISM", "ITERATIONS")
    for r in rows:
        for c in r["credentials"]:
            table.add_row(r["user"], c["mechanism"], str(c["iterations"]))
    console().print(table)


Principal = Annotated[str, typer.Option("--principal", help="e.g. User:alice")]
Operation = Annotated[str, typer.Option("--operation", help="read, write, describe, all, ...")]
Pattern = Annotated[str, typer.Option("--pattern", help="literal or prefixed")]
Host = Annotated[str, typer.Option("--host")]


def _resource(topic: str | None, group: str | None, cluster: bool) -> tuple[Any, str]:
    given = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group)]
    chosen = [(t, n) for t, n in given if n is not None]
    if cluster:
        chosen.append((ResourceType.BROKER, "kafka-cluster"))
    if len(chosen) != 1:
        fail("give exactly one of --topic, --group, --cluster", USAGE)
    return chosen[0]


@acls_app.command("add")
def add_acl(
    principal: Principal,
    operation: Operation,
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    group: Annotated[str | None, typer.Option("--group")] = None,
    cluster_resource: Annotated[bool, typer.Option("--cluster")] = False,
    pattern: Pattern = "literal",
    deny: Annotated[bool, typer.Option("--deny", help="A DENY rule (default ALLOW).")] = False,
    host: Host = "*",
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Add an ACL."""
    rtype, name = _resource(topic, group, cluster_resource)
    binding = AclBinding(
        rtype,
        name,
        _enum(ResourcePatternType, pattern, "--pattern"),
        principal,
        host,
        _enum(AclOperation, operation, "--operation"),
        AclPermissionType.DENY if deny else AclPermissionType.ALLOW,
    )
    cluster, admin, _ = connect(bootstrap, properties)
    try:
        admin.create_acls([binding], request_timeout=REQUEST_TIMEOUT)[binding].result()
    except KafkaException as exc:
        cluster.fail_with(exc, "add ACL")
    console().print(f"added: {_describe(binding)}")


def _filter(principal: str | None, topic: str | None, group: str | None) -> AclBindingFilter:
    rtype = ResourceType.TOPIC if topic else ResourceType.GROUP if group else ResourceType.ANY
    anything: Any = None
    return AclBindingFilter(
        rtype,
        topic or group or anything,
        ResourcePatternType.ANY,
        principal or anything,
        anything,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def _describe(b: Any) -> str:
    return (
        f"{b.permission_type.name} {b.principal} {b.operation.name} on "
        f"{b.restype.name.lower()} {b.name} ({b.resource_pattern_type.name.lower()}, host {b.host})"
    )


@acls_app.command("list")
def list_acls(
    principal: Annotated[str | None, typer.Option("--principal")] = None,
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    group: Annotated[str | None, typer.Option("--group")] = None,
    output: OutputOpt = Output.table,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """List ACLs, optionally of one principal or resource."""
    cluster, admin, _ = connect(bootstrap, properties)
    try:
        found: Any = admin.describe_acls(
            _filter(principal, topic, group), request_timeout=REQUEST_TIMEOUT
        ).result()
    except KafkaException as exc:
        cluster.fail_with(exc, "list ACLs")
    rows = [
        {
            "principal": b.principal,
            "permission": b.permission_type.name,
            "operation": b.operation.name,
            "resource_type": b.restype.name,
            "name": b.name,
            "pattern": b.resource_pattern_type.name,
            "host": b.host,
        }
        for b in found
    ]
    if output is Output.json:
        print_json(rows)
        return
    table = Table("PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME", "PATTERN", "HOST")
    for r in rows:
        table.add_row(*(str(v) for v in r.values()))
    console().print(table)


@acls_app.command("remove")
def remove_acls(
    principal: Annotated[str | None, typer.Option("--principal")] = None,
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    group: Annotated[str | None, typer.Option("--group")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Remove the ACLs of a principal and/or resource."""
    if not (principal or topic or group):
        fail("give --principal, --topic or --group: refusing to remove every ACL", USAGE)
    cluster, admin, _ = connect(bootstrap, properties)
    try:
        removed: Any = admin.delete_acls(
            [_filter(principal, topic, group)], request_timeout=REQUEST_TIMEOUT
        )
        gone = [b for f in removed.values() for b in f.result()]
    except KafkaException as exc:
        cluster.fail_with(exc, "remove ACLs")
    for b in gone:
        console().print(f"removed: {_describe(b)}")
    console().print(f"{len(gone)} ACL(s) removed")
