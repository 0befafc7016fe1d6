"""Helpers of the console's tests: run `samsa console` as a real process, and ask it over
HTTP."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from kafka_support import wait_until

from samsa.testing import free_port

Console = Callable[..., str]
StartConsole = Callable[..., str]


def http(
    url: str,
    data: bytes | None = None,
    auth: tuple[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """The status and body of a request; status 0 when nothing answers."""
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}))
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture
def start_console(tmp_path: Path) -> Iterator[StartConsole]:
    """``start_console(bootstrap, *options, env={...})``: `samsa console` on a free port; its
    base URL once it answers (any status: it may ask for a login)."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(bootstrap: str, *options: str, env: Mapping[str, str] | None = None) -> str:
        port = free_port()
        log = (tmp_path / f"console-{port}.log").open("wb")
        cmd = [sys.executable, "-m", "samsa.cli", "console", "--port", str(port)]
        cmd += ["-b", bootstrap, "--lag-interval", "0.5", *options]
        environment = {**os.environ, **(env or {})}
        processes.append(
            subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=environment)
        )
        base = f"http://127.0.0.1:{port}"
        # /missing answers at once, without asking the cluster anything.
        wait_until(lambda: http(base + "/missing")[0] != 0, 30, 0.1, "the console to answer")
        return base

    yield start
    for p in processes:
        p.terminate()
    for p in processes:
        # It stops once its cluster calls in flight end, each bounded by its timeout.
        p.wait(60)
