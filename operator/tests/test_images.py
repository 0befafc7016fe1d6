"""The images without a Docker engine: the Dockerfiles' install step (uv sync from uv.lock)
run for real into a scratch environment, what each Dockerfile copies exists, and both run
as a non-root user; plus the operator's command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from op_support import REPO

DOCKERFILES = {"samsa": "broker_image/Dockerfile", "samsa-operator": "operator/Dockerfile"}


@pytest.mark.parametrize("package", DOCKERFILES)
def test_dockerfile_shape(package: str) -> None:
    text = (REPO / DOCKERFILES[package]).read_text()
    # The base is a build argument, the official image by default (`make images` passes one
    # made from Debian's packages); both stages build on it, and uv comes from a named stage.
    assert re.search(r"^ARG BASE=python:3\.\d+-slim$", text, re.M)
    assert re.search(r"^FROM \$\{BASE\} AS build$", text, re.M)
    assert re.search(r"^FROM \$\{BASE\}$", text, re.M)
    assert re.search(r"^COPY --from=uv /uv /usr/local/bin/uv$", text, re.M)
    assert "COPY pyproject.toml uv.lock ./" in text
    assert f"uv sync --frozen --no-dev --package {package} --no-editable" in text
    assert re.search(r"^USER 1000:1000$", text, re.M)
    for source in re.findall(r"^COPY (?!--from)(\S+) ", text, re.M):
        assert (REPO / source).exists(), f"{DOCKERFILES[package]} copies missing {source}"


@pytest.mark.parametrize(("package", "command"), [("samsa-operator", "samsa-operator")])
def test_install_step_from_the_lock(package: str, command: str, tmp_path: Path) -> None:
    """The Dockerfile's `uv sync` gives a working entry point (uv's cache makes it quick)."""
    venv = tmp_path / "venv"
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv), "UV_LINK_MODE": "copy"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(
        ["uv", "sync", "--frozen", "--no-dev", "--package", package, "--no-editable", "-q"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=300,
    )
    result = subprocess.run(
        [str(venv / "bin" / command), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "--namespace" in result.stdout
    # The operator's image carries no test tooling.
    assert not (venv / "bin" / "pytest").exists()


def test_cli_mistake_is_one_line_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "samsa_operator", "--health-port", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "invalid int value: 'x'" in result.stderr.splitlines()[-1]


def test_bad_environment_is_one_line_without_traceback() -> None:
    env = {**os.environ, "SAMSA_OPERATOR_RESYNC_SECONDS": "soon"}
    result = subprocess.run(
        [sys.executable, "-m", "samsa_operator"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "samsa-operator: error: SAMSA_OPERATOR_RESYNC_SECONDS='soon' is not a positive number "
        "of seconds"
    )
