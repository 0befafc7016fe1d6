"""The node agent's pure parts: pod addresses, what an image runs here, the files it writes."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import pytest

from samsa.dev.kube import images
from samsa.dev.kube.agent import _expand, _format_map, pod_ip


def test_each_pod_has_a_loopback_address_of_its_own_away_from_127_0_x() -> None:
    addresses = {pod_ip(f"uid-{i}") for i in range(2000)}
    assert len(addresses) >= 1990  # a clash is rare, and only matters within one run
    for a in addresses:
        ip = ipaddress.ip_address(a)
        assert ip.is_loopback and not a.startswith("127.0.") and not a.endswith(".0")
    assert pod_ip("same") == pod_ip("same")


def test_images_become_local_programs_with_container_paths_mapped(tmp_path: Path) -> None:
    mounts = {"/var/lib/samsa": tmp_path / "pv", "/var/run/samsa": tmp_path / "run"}
    broker = {
        "command": ["samsa", "broker"],
        "args": [
            "--data-dir",
            "/var/lib/samsa/data",
            "--config",
            "/var/run/samsa/server.properties",
        ],
    }
    argv = images.command(
        "ghcr.io/samsa-dev/samsa:0.1.0", broker, {}, mounts, "127.1.2.3", 0, tmp_path
    )
    assert argv == [
        sys.executable, "-m", "samsa.cli", "broker",
        "--data-dir", f"{tmp_path}/pv/data", "--config", f"{tmp_path}/run/server.properties",
    ]  # fmt: skip
    init = {"command": ["sh", "-c", "cp /var/run/samsa/a /var/lib/samsa/b; ls /var/lib/samsax"]}
    argv = images.command(
        "ghcr.io/samsa-dev/samsa:0.1.0", init, {}, mounts, "127.1.2.3", 0, tmp_path
    )
    assert argv == ["sh", "-c", f"cp {tmp_path}/run/a {tmp_path}/pv/b; ls /var/lib/samsax"]
    operator = {"args": ["--verbose"]}
    argv = images.command(
        "ghcr.io/samsa-dev/samsa-operator:0.1.0", operator, {}, {}, "", 0, tmp_path
    )
    assert argv == [sys.executable, "-m", "samsa_operator", "--verbose"]
    with pytest.raises(images.UnknownImage, match="busybox"):
        images.command("busybox:1", {"command": ["sleep"]}, {}, {}, "", 0, tmp_path)


def test_zookeeper_gets_the_config_its_entrypoint_writes_bound_to_the_pod(tmp_path: Path) -> None:
    env = {
        "ZOO_SERVERS": "server.1=zk-0.zk.ns.svc:2888:3888;2181 "
        "server.2=zk-1.zk.ns.svc:2888:3888;2181",
        "ZOO_STANDALONE_ENABLED": "false",
        "ZOO_DATA_DIR": "/data",
        "ZOO_DATA_LOG_DIR": "/datalog",
    }
    mounts = {"/data": tmp_path / "data", "/datalog": tmp_path / "datalog"}
    text = images.zookeeper_config(env, "127.9.9.9", 1, mounts)
    lines = text.splitlines()
    assert f"dataDir={tmp_path}/data" in lines and f"dataLogDir={tmp_path}/datalog" in lines
    assert "clientPortAddress=127.9.9.9" in lines and "admin.serverAddress=127.9.9.9" in lines
    assert "server.2=zk-1.zk.ns.svc:2888:3888" in lines
    assert (tmp_path / "data" / "myid").read_text() == "2\n"


def test_downward_api_files_and_variables_read_as_the_kubelet_writes_them() -> None:
    text = _format_map({"b": "2", "kafka.samsa.dev/rack": "zone-1"})
    assert text == 'b="2"\nkafka.samsa.dev/rack="zone-1"'
    assert _expand("$(A):$(B)", {"A": "x"}) == "x:$(B)"
