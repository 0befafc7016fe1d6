"""`samsa users` and `samsa acls` against a broker with SASL and the ACL authorizer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from samsa.cli.main import register_tools
from samsa.testing import InProcessBroker, free_port

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-pw" user_alice="alice-pw";'
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    port = free_port()
    config = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with InProcessBroker(Path(tmp_path_factory.mktemp("cli")), config, port=port) as b:
        yield b


def samsa(broker: InProcessBroker, *args: str, user: str = "admin") -> Result:
    sasl = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        f"sasl.username={user}",
        "-X",
        f"sasl.password={user}-pw",
    ]
    result = CliRunner().invoke(register_tools(), [*args, "-b", broker.bootstrap_servers, *sasl])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_users_set_list_delete(broker: InProcessBroker) -> None:
    assert samsa(broker, "users", "set", "carol", "--password", "pw").exit_code == 0
    listed = json.loads(samsa(broker, "users", "list", "-o", "json").stdout)
    assert listed == [
        {"user": "carol", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}
    ]
    assert samsa(broker, "users", "delete", "carol").exit_code == 0
    assert json.loads(samsa(broker, "users", "list", "-o", "json").stdout) == []


def test_acls_add_list_remove(broker: InProcessBroker) -> None:
    added = samsa(
        broker,
        "acls",
        "add",
        "--principal",
        "User:alice",
        "--operation",
        "read",
        "--topic",
        "logs-",
        "--pattern",
        "prefixed",
    )
    assert added.exit_code == 0, added.stdout
    listed = json.loads(
        samsa(broker, "acls", "list", "--principal", "User:alice", "-o", "json").stdout
    )
    assert [(r["operation"], r["name"], r["pattern"]) for r in listed] == [
        ("READ", "logs-", "PREFIXED")
    ]
    removed = samsa(broker, "acls", "remove", "--principal", "User:alice")
    assert "1 ACL(s) removed" in removed.stdout
    assert json.loads(samsa(broker, "acls", "list", "-o", "json").stdout) == []


def test_mistakes_are_one_line_and_refusals_name_the_error(broker: InProcessBroker) -> None:
    bad = samsa(
        broker, "acls", "add", "--principal", "User:x", "--operation", "fly", "--topic", "t"
    )
    assert bad.exit_code == 2 and "fly" in bad.output and "Traceback" not in bad.output
    denied = samsa(broker, "users", "set", "eve", "--password", "pw", user="alice")
    assert denied.exit_code != 0
    assert "CLUSTER_AUTHORIZATION_FAILED" in denied.output.upper().replace(" ", "_")
