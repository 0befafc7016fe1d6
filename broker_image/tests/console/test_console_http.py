"""The console as a process, over plain HTTP: its own login, a SASL SCRAM cluster reached with
a user's credentials through -X options, and readable error pages when the cluster cannot be
reached."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from console_support import StartConsole, http

from samsa.testing import InProcessBroker, free_port

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw";'


def _sasl(mechanism: str, user: str, password: str) -> list[str]:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    return [arg for key, value in props.items() for arg in ("-X", f"{key}={value}")]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    """A broker that takes SASL only, with a SCRAM user `console` (as a KafkaUser's Secret
    holds one)."""
    port = free_port()
    config = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
    }
    with InProcessBroker(Path(tmp_path_factory.mktemp("secured")), config, port=port) as b:
        admin = AdminClient(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-pw",
            }
        )
        upsert = UserScramCredentialUpsertion(
            "console", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"console-pw"
        )
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
            future.result()
        yield b


def test_scram_credentials_reach_a_secured_cluster_behind_the_consoles_login(
    secured: InProcessBroker, start_console: StartConsole
) -> None:
    base = start_console(
        secured.bootstrap_servers,
        *_sasl("SCRAM-SHA-512", "console", "console-pw"),
        env={"SAMSA_CONSOLE_PASSWORD": "open-sesame"},
    )
    status, body = http(base + "/")
    assert status == 401 and "Log in to use the console." in body
    assert http(base + "/", auth=("admin", "wrong"))[0] == 401
    assert http(base + "/", auth=("someone", "open-sesame"))[0] == 401
    status, body = http(base + "/", auth=("admin", "open-sesame"))
    assert status == 200
    assert f"<td>{secured.port}</td>" in body and "controller" in body
    # A refused write still asks for the login first.
    assert http(base + "/topics/t/produce", b"value=x")[0] == 401


def test_users_file_logins(
    secured: InProcessBroker, start_console: StartConsole, tmp_path: Path
) -> None:
    users = tmp_path / "console-users"
    users.write_text("# operators\nana:first:pw\nbo:second\n")
    base = start_console(
        secured.bootstrap_servers,
        *_sasl("SCRAM-SHA-512", "console", "console-pw"),
        "--users-file",
        str(users),
    )
    assert http(base + "/topics", auth=("ana", "first:pw"))[0] == 200
    assert http(base + "/topics", auth=("bo", "second"))[0] == 200
    assert http(base + "/topics", auth=("bo", "first:pw"))[0] == 401


def test_writes_posted_from_another_site_are_refused(
    secured: InProcessBroker, start_console: StartConsole
) -> None:
    base = start_console(
        secured.bootstrap_servers,
        *_sasl("SCRAM-SHA-512", "console", "console-pw"),
        "--read-write",
    )
    status, body = http(
        base + "/topics/t/produce", b"value=x", headers={"Origin": "http://elsewhere.example"}
    )
    assert status == 403 and "Refused a write posted from another site" in body
    status, body = http(
        base + "/topics/no-such-topic/produce", b"value=x", headers={"Origin": base}
    )
    assert status == 404 and "does not exist" in body


def test_wrong_cluster_credentials_give_an_error_page(
    secured: InProcessBroker, start_console: StartConsole
) -> None:
    base = start_console(
        secured.bootstrap_servers, *_sasl("SCRAM-SHA-512", "console", "not-the-password")
    )
    status, body = http(base + "/topics")
    assert status in (502, 503)
    assert "id='error'" in body and "Traceback" not in body


def test_an_unreachable_cluster_gives_a_503_page(start_console: StartConsole) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    base = start_console(nobody)
    status, body = http(base + "/")
    assert status == 503
    assert f"cannot reach the broker at {nobody}" in body
    assert "Traceback" not in body
