"""Kafka Connect from the cached jars: one distributed-mode worker on 127.0.0.1 against any
bootstrap server, and a small client of its REST API.

The worker keeps its connectors' configs, source offsets and statuses in three compacted topics
of the cluster it serves, and finds the FileStream connectors and the JSON converters on its
classpath (the ``connect`` jar set), so no Kafka distribution and no plugin.path are needed.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from samsa_dev.kafka import SERVER_LOG4J, free_port, java_command

JAR_SET = "connect"
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


class ConnectError(RuntimeError):
    """The worker answered a REST call with an error, or did not answer at all."""


def worker_properties(
    bootstrap: str, group: str, port: int, replication_factor: int = -1
) -> dict[str, str]:
    """A distributed worker's configuration: its group, its three internal topics named after
    the group, JSON converters, and its REST listener on 127.0.0.1:`port`.

    A replication factor of -1 takes the brokers' ``default.replication.factor``.
    """
    rf = str(replication_factor)
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "key.converter": JSON_CONVERTER,
        "value.converter": JSON_CONVERTER,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        # Source offsets reach the offsets topic within a second, not the default minute.
        "offset.flush.interval.ms": "1000",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        # The connectors on the classpath declare themselves (KIP-898): reading their service
        # manifests takes a second or two where reflective scanning of every jar takes twenty.
        "plugin.discovery": "service_load",
    }


class ConnectWorker:
    """A Kafka Connect worker process in distributed mode, kept in `directory` (its
    properties, its log4j configuration, ``connect.log``)."""

    def __init__(
        self,
        directory: Path,
        bootstrap: str,
        group: str,
        port: int | None = None,
        overrides: dict[str, str] | None = None,
        heap: str = "384m",
        jvm_options: tuple[str, ...] = (),
    ) -> None:
        self.directory = Path(directory).resolve()
        self.port = port or free_port()
        self.properties = {**worker_properties(bootstrap, group, self.port), **(overrides or {})}
        self.heap = heap
        self.jvm_options = jvm_options
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "connect.log"

    def command(self) -> list[str]:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "worker.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        log4j = self.directory / "log4j2.properties"
        log4j.write_text(SERVER_LOG4J.format(log=self.log))
        return java_command(
            MAIN_CLASS,
            [str(config)],
            jar_sets=(JAR_SET,),
            heap=self.heap,
            log4j=log4j,
            jvm_options=self.jvm_options,
        )

    def start(self) -> ConnectWorker:
        command = self.command()
        with open(self.directory / "stdout.log", "ab") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 90.0) -> dict[str, Any]:
        """Until the worker is healthy (KIP-1017: it has read its internal topics and joined its
        group; before that ``/health`` answers 503); returns the REST API's root resource
        (version, Kafka cluster id)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if not self.running():
                raise ConnectError(f"the Connect worker exited; see {self.log}")
            try:
                self.rest("GET", "/health", timeout=5)
                root: dict[str, Any] = self.rest("GET", "/", timeout=5)
                return root
            except ConnectError as exc:
                last = exc
            time.sleep(0.25)
        raise ConnectError(f"the Connect worker was not healthy in {timeout}s: {last}")

    def kill(self) -> None:
        """kill -9: no graceful leave, no final offset flush."""
        self._signal(signal.SIGKILL)

    def stop(self, timeout: float = 30.0) -> None:
        if not self.running():
            return
        self._signal(signal.SIGTERM, timeout)

    def _signal(self, sig: int, timeout: float = 30.0) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """One call to the REST API; its JSON answer (None when it has no body)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise ConnectError(f"{method} {path}: {exc.code} {exc.read().decode()}") from exc
        except (OSError, urllib.error.URLError) as exc:
            raise ConnectError(f"{method} {path}: {exc}") from exc
        return json.loads(raw) if raw else None

    def put_connector(self, name: str, config: dict[str, str]) -> Any:
        return self.rest("PUT", f"/connectors/{name}/config", config)

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.rest("GET", f"/connectors/{name}/status")
        return status

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """The connector's committed offsets (KIP-875): source offsets from the offsets topic,
        a sink's from its consumer group."""
        offsets: list[dict[str, Any]] = self.rest("GET", f"/connectors/{name}/offsets")["offsets"]
        return offsets
