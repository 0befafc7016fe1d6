"""First contact: docs/kubernetes.md's "Try it on this machine" commands, run exactly as
written by bash on a fresh `samsa-dev k8s up`, reach a Ready cluster and a record produced
and consumed from this machine, with no step the docs leave out.

They run in a folder of their own that holds the repository's files by link (the control
plane's data goes there, not into the work tree). A whole control plane, the chart and a
3-broker cluster: about two minutes on 2 cores, so `make e2e` runs it, not `make test`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from kube_support import REPO

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

DOC = REPO / "docs" / "kubernetes.md"
LINKED = ("helm", "examples", ".tools", ".venv")


def documented_commands() -> str:
    """The first sh block under the "Try it on this machine" heading."""
    text = DOC.read_text()
    section = text.split("## Try it on this machine", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.*?)```", section, re.S)
    assert found, "docs/kubernetes.md has no commands under 'Try it on this machine'"
    return found.group(1)


def test_the_documented_commands_work_as_written(tmp_path: Path) -> None:
    commands = documented_commands()
    assert "samsa-dev k8s up" in commands and "samsa consume" in commands
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "VIRTUAL_ENV")}
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", commands],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        # A failed command leaves the control plane up: stop it (a no-op after the docs'
        # own `samsa-dev k8s down`).
        subprocess.run(
            [str(REPO / ".venv" / "bin" / "samsa-dev"), "k8s", "down"],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
        )
    said = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, said
    assert "hello, Samsa" in done.stdout.splitlines(), said
    assert "kafkacluster.kafka.samsa.dev/demo condition met" in done.stdout, said
    # `samsa-dev k8s down` leaves nothing running: no pod's process outlives the cluster.
    assert not processes_mentioning(str(tmp_path)), processes_mentioning(str(tmp_path))


def processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if text in args:
            found.append(args)
    return found
