"""The Java side of the client matrix: the programs in tests/clients/java, compiled once
against the cached Kafka jars (``samsa_dev.kafka.java_program``).

- ``JavaClient``: scenarios of the Java kafka-clients, run at once in one JVM that prints
  their findings as one JSON object.
- ``ToolShell``: Kafka's command-line tools by their main classes, one after another in one
  JVM, each run answered as a ``subprocess.CompletedProcess`` like ``samsa_dev.kafka.run_tool``.
- ``EventTool``: one of Kafka's tools in a process of its own whose stdout is JSON events, one
  a line (the verifiable producer and consumer of Kafka's system tests).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from samsa_dev.kafka import java_program, main_class, tool_command

JAVA = Path(__file__).resolve().parent / "java"
# Every step of JavaClient is bounded by 30 s; a scenario has a few.
RUN_TIMEOUT = 180.0

# A tool by its script name, and its arguments: the completed run.
Tool = Callable[..., subprocess.CompletedProcess[str]]


def java_client(
    *scenarios: list[str], timeout: float = RUN_TIMEOUT, client_config: Path | None = None
) -> dict[str, Any]:
    """Run JavaClient scenarios (each a command and its flags) at once in one JVM; what each
    found, by command (its stderr, on failure, in the message). ``client_config``: a
    properties file whose settings (security, say) every client of the run takes."""
    args = [word for scenario in scenarios for word in ("--", *scenario)]
    argv = java_program(JAVA / "JavaClient.java", args, heap="256m")
    env = {**os.environ, "SAMSA_CLIENT_CONFIG": str(client_config) if client_config else ""}
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
    )
    assert done.returncode == 0, f"JavaClient failed: {done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


class ToolShell:
    """One JVM that runs Kafka's tools on request (tests/clients/java/ToolShell.java)."""

    def __init__(self, log: Path) -> None:
        self._log = log.open("w")
        self.process = subprocess.Popen(
            java_program(JAVA / "ToolShell.java", [], heap="256m"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._answers: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self._answers.put(line)
        self._answers.put(None)

    def run(
        self, tool: str, args: list[str], *, input: str | None = None, timeout: float = 90.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a tool (by its script name) to completion, as ``run_tool`` would."""
        assert self.process.stdin is not None
        request = {"tool": main_class(tool), "args": args, "input": input}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise TimeoutError(
                f"{tool} {' '.join(args)} did not finish in {timeout:.0f} s"
            ) from None
        if line is None:
            raise RuntimeError(f"the tool shell exited ({self.process.wait()}) during {tool}")
        answer = json.loads(line)
        return subprocess.CompletedProcess(
            [tool, *args], answer["rc"], answer["stdout"], answer["stderr"]
        )

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()


class EventTool:
    """A tool printing JSON events on stdout, running while the test watches its events."""

    def __init__(self, tool: str, args: list[str], log: Path) -> None:
        self.name = tool
        self._log = log.open("w")
        self.process = subprocess.Popen(
            tool_command(tool, args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        assert self.process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,))
        self._reader.daemon = True
        self._reader.start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e.get("name") == name]

    def wait_exit(self, timeout: float) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log.close()
