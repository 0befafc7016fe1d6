"""`samsa broker`: bad settings stop start-up with one line naming the key; SIGTERM is clean."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_support import wait_until

from samsa.testing import free_port

SAMSA = [sys.executable, "-m", "samsa.cli"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SAMSA, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--override", "no.such.key=1"], "no.such.key"),
        (["--override", "num.partitions=lots"], "num.partitions"),
        (["--override", "log.retention.ms=-7"], "log.retention.ms"),
        (["--override", "justakey"], "justakey"),
        (["--listen", "localhost"], "--listen"),
        # Both name the listeners: one would silently drop the other's.
        (
            ["--listen", "127.0.0.1:0", "--override", "listeners=SASL_SSL://127.0.0.1:0"],
            "--listen: listeners",
        ),
    ],
)
def test_bad_settings_give_one_line_and_exit_2(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    result = _run("broker", "--data-dir", str(tmp_path), *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


def test_listen_with_a_config_file_naming_listeners_gives_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:0\n")
    result = _run(
        "broker",
        "--data-dir",
        str(tmp_path / "data"),
        "--config",
        str(props),
        "--listen",
        "127.0.0.1:0",
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "--listen" in lines[0] and "listeners" in lines[0] and str(props) in lines[0]
    assert "Traceback" not in result.stderr


def test_unreadable_config_file(tmp_path: Path) -> None:
    result = _run("broker", "--data-dir", str(tmp_path), "--config", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert "nope" in result.stderr and "Traceback" not in result.stderr


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = _run("broker", "--data-dir", str(tmp_path), "--listen", f"127.0.0.1:{port}")
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_config_file_and_sigterm(tmp_path: Path) -> None:
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nnum.partitions=4\n")
    proc = subprocess.Popen(
        [*SAMSA, "broker", "--data-dir", str(tmp_path / "data"), "--config", str(props)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                return False

        wait_until(listening, 30, what="the broker to listen")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert "Traceback" not in err
    assert "stopped" in err
    assert (tmp_path / "data" / "meta.properties").exists()


def test_a_broker_still_joining_its_cluster_refuses_connections(tmp_path: Path) -> None:
    """Its socket is bound (the port is known) but accepts nothing before requests can be
    answered: before, they failed on an assertion and the connection was dropped."""
    port, nowhere = free_port(), free_port()  # no ZooKeeper listens on `nowhere`
    log = tmp_path / "broker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *SAMSA,
                "broker",
                "--data-dir",
                str(tmp_path / "data"),
                "--listen",
                f"127.0.0.1:{port}",
                "--override",
                f"zookeeper.connect=127.0.0.1:{nowhere}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # ZooKeeper refuses: the broker is joining its cluster, past binding its socket.
        wait_until(lambda: "Connection refused" in log.read_text(), 30)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), 2).close()
    finally:
        proc.kill()
        proc.wait(10)
