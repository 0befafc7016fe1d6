"""`samsa local up|status|down`: a real ZooKeeper and broker processes, as a person runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic


def samsa(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli", "local", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def test_up_status_down_and_up_again_keeps_the_data(tmp_path: Path) -> None:
    data = str(tmp_path / "cluster")
    up = samsa("up", "--brokers", "1", "--data-dir", data)
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.strip().splitlines()[-1]
        assert bootstrap.startswith("127.0.0.1:")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("kept", 2, 1)])["kept"].result(30)
        status = samsa("status", "--data-dir", data)
        assert status.returncode == 0
        assert "zookeeper" in status.stdout and "broker 0" in status.stdout
        assert status.stdout.count("running") == 2
        down = samsa("down", "--data-dir", data)
        assert down.returncode == 0, down.stderr
        assert samsa("status", "--data-dir", data).stdout.count("stopped") == 2
        again = samsa("up", "--brokers", "1", "--data-dir", data)
        assert again.returncode == 0, again.stderr
        admin = AdminClient({"bootstrap.servers": again.stdout.strip().splitlines()[-1]})
        assert "kept" in admin.list_topics(timeout=30).topics
    finally:
        samsa("down", "--data-dir", data)


def test_without_zookeeper_installed_it_says_how_to_install_it(tmp_path: Path) -> None:
    # No java on the PATH (and no ZOOKEEPER_CLASSPATH): as on a machine without the package.
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "ZOOKEEPER_CLASSPATH")}
    env["PATH"] = str(Path(sys.executable).parent)
    result = samsa("up", "--data-dir", str(tmp_path / "c"), env=env)
    assert result.returncode == 1
    assert "apt-get install zookeeper" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_down_with_no_cluster_is_a_one_line_error(tmp_path: Path) -> None:
    result = samsa("down", "--data-dir", str(tmp_path / "none"))
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: no local cluster in {tmp_path / 'none'}"
