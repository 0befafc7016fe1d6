"""The node agent's name resolution (nss_wrapper and a hosts file it replaces as pods come and
go): a pod's Python process that looks names up from several threads survives the file being
replaced under it. nss_wrapper 1.1.12 crashed such a process, a controller among them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest

from samsa_dev.kube.agent import NodeAgent

RESOLVERS = """
import socket, sys, threading, time
stop = time.monotonic() + float(sys.argv[1])
def resolve(k):
    while time.monotonic() < stop:
        try:
            socket.getaddrinfo(f"pod-{k}.broker.ns.svc", 9092)
        except socket.gaierror:
            pass
threads = [threading.Thread(target=resolve, args=(k,)) for k in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def _hosts(agent: NodeAgent, generation: int) -> None:
    lines = "".join(f"127.{generation % 200}.{k}.1 pod-{k}.broker.ns.svc\n" for k in range(6))
    partial = agent.hosts_file.with_suffix(".partial")
    partial.write_text("127.0.0.1 localhost\n" + lines)
    partial.replace(agent.hosts_file)


def test_lookups_from_many_threads_survive_the_hosts_file_being_replaced(tmp_path: Path) -> None:
    if not any(Path(d, "libnss_wrapper.so").exists() for d in ("/usr/lib/x86_64-linux-gnu",)):
        pytest.skip("nss_wrapper is not installed")
    agent = NodeAgent(api=cast(Any, None), workdir=tmp_path)
    agent.prepare()
    _hosts(agent, 0)
    seconds = 6.0
    process = subprocess.Popen(
        [sys.executable, "-c", RESOLVERS, str(seconds)],
        env={**os.environ, **agent.name_env()},
    )
    generation = 0
    deadline = time.monotonic() + seconds + 30
    while process.poll() is None and time.monotonic() < deadline:
        generation += 1
        _hosts(agent, generation)
        time.sleep(0.001)  # the pace of the rewrites, not a wait for anything
    if process.poll() is None:
        process.kill()
    assert process.wait() == 0, f"the resolving process ended with {process.returncode}"
