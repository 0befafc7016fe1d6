"""What a container image means here, with no container runtime: the local program that does
what the image would. Paths in the container (its volume mounts) become the pod's folders.

- the broker image (``.../samsa``): ``samsa ...`` runs ``python -m samsa.cli ...``; ``sh`` and
  ``bash`` scripts (the init container) run with the local shell;
- the operator image (``.../samsa-operator``): ``python -m samsa_operator`` with its args;
- the official ZooKeeper image (``zookeeper``): what its entrypoint does, a zoo.cfg from the
  ``ZOO_*`` environment and ``myid`` from the ordinal, then Debian's ZooKeeper server, bound
  to the pod's IP.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from samsa.local.zookeeper import MAIN_CLASS, zookeeper_classpath

# The admin server (the pods' readiness probe asks it `ruok`) needs the servlet API, which
# Debian's ZooKeeper does not name on its classpath (package libservlet-api-java); its log
# goes to stdout through slf4j-simple.
ZOOKEEPER_EXTRA_JARS = ("/usr/share/java/servlet-api.jar", "/usr/share/java/slf4j-simple.jar")


class UnknownImage(ValueError):
    pass


def repository(image: str) -> str:
    """``ghcr.io/samsa-dev/samsa:0.1.0`` -> ``ghcr.io/samsa-dev/samsa``."""
    name = image.split("@", 1)[0]
    head, _, tail = name.rpartition(":")
    return head if head and "/" not in tail else name


def mapped(text: str, mounts: dict[str, Path]) -> str:
    """Every container path under a mount, as the folder it is here (in one pass, a path
    starting where no other path character precedes it, the longest mount first)."""
    if not mounts:
        return text
    paths = sorted(mounts, key=len, reverse=True)
    pattern = r"(?<![\w./-])(" + "|".join(re.escape(p) for p in paths) + r")(?![\w.-])"
    return re.sub(pattern, lambda m: str(mounts[m.group(1)]), text)


def zookeeper_config(
    env: dict[str, str], pod_ip: str, ordinal: int, mounts: dict[str, Path]
) -> str:
    """zoo.cfg as the official image's entrypoint writes it, with every address the pod's."""
    data = mapped(env.get("ZOO_DATA_DIR", "/data"), mounts)
    lines = [
        f"dataDir={data}",
        f"dataLogDir={mapped(env.get('ZOO_DATA_LOG_DIR', '/datalog'), mounts)}",
        f"tickTime={env.get('ZOO_TICK_TIME', '2000')}",
        f"initLimit={env.get('ZOO_INIT_LIMIT', '5')}",
        f"syncLimit={env.get('ZOO_SYNC_LIMIT', '2')}",
        f"maxClientCnxns={env.get('ZOO_MAX_CLIENT_CNXNS', '60')}",
        f"standaloneEnabled={env.get('ZOO_STANDALONE_ENABLED', 'true')}",
        f"admin.enableServer={env.get('ZOO_ADMINSERVER_ENABLED', 'true')}",
        f"admin.serverAddress={pod_ip}",
        "admin.serverPort=8080",
        f"4lw.commands.whitelist={env.get('ZOO_4LW_COMMANDS_WHITELIST', 'srvr')}",
        "clientPort=2181",
        f"clientPortAddress={pod_ip}",
    ]
    # server.N=host:2888:3888;2181: the client part is dropped, the address above serves.
    for server in env.get("ZOO_SERVERS", "server.1=localhost:2888:3888;2181").split():
        lines.append(server.split(";", 1)[0])
    Path(data).mkdir(parents=True, exist_ok=True)
    (Path(data) / "myid").write_text(f"{ordinal + 1}\n")
    return "\n".join(lines) + "\n"


def command(
    image: str,
    container: dict[str, object],
    env: dict[str, str],
    mounts: dict[str, Path],
    pod_ip: str,
    ordinal: int,
    scratch: Path,
) -> list[str]:
    """The local command line that plays this container."""
    repo = repository(image)
    cmd = [str(c) for c in container.get("command") or []]  # type: ignore[attr-defined]
    args = [str(a) for a in container.get("args") or []]  # type: ignore[attr-defined]
    if repo.endswith("/samsa-operator"):
        return [sys.executable, "-m", "samsa_operator", *args]
    if repo.endswith("/samsa"):
        argv = [mapped(a, mounts) for a in cmd + args]
        if argv and argv[0] == "samsa":
            return [sys.executable, "-m", "samsa.cli", *argv[1:]]
        if argv and argv[0] in ("sh", "bash", "/bin/sh", "/bin/bash"):
            return ["sh", *argv[1:]]
        raise UnknownImage(f"{image}: no local program for the command {cmd + args}")
    if repo.rsplit("/", 1)[-1] == "zookeeper":
        config = scratch / "zoo.cfg"
        config.write_text(zookeeper_config(env, pod_ip, ordinal, mounts))
        return [
            "java",
            "-Xmx128m",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.log.dir=" + str(scratch),
            "-cp",
            ":".join(
                [zookeeper_classpath(), *(j for j in ZOOKEEPER_EXTRA_JARS if Path(j).exists())]
            ),
            MAIN_CLASS,
            str(config),
        ]
    raise UnknownImage(f"the node agent cannot run the image {image}")
