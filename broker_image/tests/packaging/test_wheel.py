"""What ships is the broker alone: its wheel holds no development tooling, and a venv with only
that wheel (and its dependencies) installed serves Kafka clients with `samsa broker`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.testing import free_port

ROOT = Path(__file__).resolve().parents[3]
# Any path segment that would mean development tooling inside the broker's package.
DEVELOPMENT = re.compile(r"(^|/)(dev|samsa_dev|kube|gomod|maven|pki\.py|differences\.py)(/|$)")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    assert uv, "uv is installed by make setup"
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [uv, "build", "--package", "samsa", "--wheel", "--out-dir", str(out), "--quiet"],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    (built,) = out.glob("samsa-*.whl")
    return built


def test_the_wheel_holds_the_broker_and_no_development_tooling(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "samsa/broker/server.py" in names and "samsa/cli/main.py" in names
    assert "samsa/testing/inprocess.py" in names  # the in-process fixture is for users too
    tooling = [n for n in names if DEVELOPMENT.search(n)]
    assert not tooling, tooling


@pytest.fixture(scope="module")
def shipped_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the wheel and its dependencies, nothing of the workspace."""
    uv = shutil.which("uv")
    assert uv
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), str(wheel)],
        check=True,
        timeout=600,
        cwd=venv,  # not the workspace: uv must not pick up its sources
    )
    return venv


def test_the_shipped_venv_has_no_development_tooling(shipped_venv: Path) -> None:
    python = shipped_venv / "bin" / "python"
    for module in ("samsa_dev", "samsa.dev", "samsa.testing.kube"):
        found = subprocess.run(
            [str(python), "-c", f"import {module}"], capture_output=True, text=True, timeout=60
        )
        assert found.returncode != 0 and "ModuleNotFoundError" in found.stderr, module


@pytest.fixture
def shipped_broker(shipped_venv: Path, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            str(shipped_venv / "bin" / "samsa"),
            "broker",
            "--data-dir",
            str(tmp_path / "data"),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_samsa_broker_from_the_wheel_alone_serves_a_producer_and_a_consumer(
    shipped_broker: str,
) -> None:
    producer = Producer({"bootstrap.servers": shipped_broker, "acks": "all"})
    delivered: list[object] = []
    deadline = time.monotonic() + 60
    while None not in delivered and time.monotonic() < deadline:
        # the first produce may race the broker's start and fail: then it is sent again
        producer.produce("shipped", b"from the wheel", on_delivery=lambda e, m: delivered.append(e))
        producer.flush(10)
    assert None in delivered, delivered
    consumer = Consumer(
        {"bootstrap.servers": shipped_broker, "group.id": "g", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition("shipped", 0, 0)])
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1)
        assert message is not None and message.error() is None
        assert message.value() == b"from the wheel"
    finally:
        consumer.close()
