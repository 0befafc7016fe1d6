"""What the harness needs of a system under test, the same for Samsa and its peers.

A system starts its servers on 127.0.0.1, names the endpoint its clients connect to, creates
streams (Kafka topics), kills the leader of a stream as a crash would (and, where there is no
replica to take over, restarts it: recovery is then a restart), and stops cleanly.
"""

from __future__ import annotations

import shutil
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from bench.procs import cpu_seconds


class System(ABC):
    #: the key of its load generator in `bench.clients`, and of its column in the tables
    key: ClassVar[str]
    #: shown in the tables: the product and how it is deployed, e.g. "3 brokers, RF=3"
    name: str = ""
    topology: str = ""
    #: "failover" when a replica takes over; "restart" when the only server is restarted
    recovery: str = "failover"
    #: the load generator, in words
    client: str = ""
    #: speaks the Kafka protocol: takes acks=all and acks=1 produce, and Kafka's perf tools
    kafka_protocol: ClassVar[bool] = False

    def __init__(self, workdir: Path | None = None) -> None:
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix=f"bench-{self.key}-"))
        self.endpoint = ""

    @abstractmethod
    def start(self) -> None:
        """Start every server and return once clients can create streams and write."""

    @abstractmethod
    def create_stream(self, name: str, partitions: int) -> None:
        """A topic (or stream) with the system's replication; partitions where that applies."""

    @abstractmethod
    def kill_leader(self, stream: str) -> None:
        """SIGKILL the server leading `stream` (restarting it where no replica can take over)."""

    def stored(self, stream: str) -> int:
        """How many records `stream` holds (0 while it is not known yet)."""
        if not self.kafka_protocol:
            raise NotImplementedError
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.endpoint, "group.id": "bench-stored"})
        try:
            topics = consumer.list_topics(stream, timeout=5).topics
            partitions = topics[stream].partitions if stream in topics else {}
            return sum(
                consumer.get_watermark_offsets(TopicPartition(stream, p), timeout=5)[1]
                for p in partitions
            )
        except KafkaException:  # a new stream not in metadata yet, a broker down
            return 0
        finally:
            consumer.close()

    @abstractmethod
    def server_pids(self) -> list[int]:
        """The live server processes, for CPU accounting."""

    @abstractmethod
    def _stop_servers(self) -> list[int]:
        """SIGTERM every live server; their exit codes (killed ones are not counted)."""

    def stop(self) -> list[int]:
        """Stop every server and remove the data; the exit codes of those that were alive."""
        try:
            return self._stop_servers()
        finally:
            if self._own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.server_pids())

    @property
    def label(self) -> str:
        return f"{self.name} ({self.topology})"

    def __enter__(self) -> System:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
