"""`make demo`: a real broker process, a topic, records produced and consumed with the CLI, then
Spark job (a) (click counts per campaign window) on local Spark against that broker.

Everything goes through the same commands a person would type; the broker's data lives in
./.samsa/demo and is kept between runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(".samsa/demo")
PORT = int(os.environ.get("SAMSA_DEMO_PORT", "19092"))
BOOTSTRAP = f"127.0.0.1:{PORT}"


def samsa(*args: str, stdin: str | None = None) -> str:
    cmd = [sys.executable, "-m", "samsa.cli", *args]
    print("$ samsa " + " ".join(args), flush=True)
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(out.returncode)
    return out.stdout


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise SystemExit(f"the broker did not start listening on {BOOTSTRAP}")


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    broker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "samsa.cli",
            "broker",
            "--data-dir",
            str(DATA),
            "--listen",
            BOOTSTRAP,
            "--http",
            f"127.0.0.1:{PORT + 1}",
            "--log-level",
            "WARNING",
        ]
    )
    try:
        wait_port(PORT)
        print(f"broker up on {BOOTSTRAP} (metrics on http://127.0.0.1:{PORT + 1}/metrics)")
        samsa(
            "topics",
            "create",
            "demo-clicks",
            "--partitions",
            "3",
            "--if-not-exists",
            "-b",
            BOOTSTRAP,
        )
        samsa("topics", "describe", "demo-clicks", "-b", BOOTSTRAP)
        lines = "".join(f"user{i % 5}:click on ad {i}\n" for i in range(20))
        samsa(
            "produce",
            "demo-clicks",
            "--key-separator",
            ":",
            "--header",
            "source=demo",
            "-b",
            BOOTSTRAP,
            stdin=lines,
        )
        samsa(
            "consume",
            "demo-clicks",
            "--from-beginning",
            "--count",
            "20",
            "--format",
            "%p/%o  %k => %s\n",
            "-b",
            BOOTSTRAP,
        )
        # Last, Spark: job (a) on local Spark against the same broker.
        from samsa_spark.demo import run_ad_clicks

        run_ad_clicks(BOOTSTRAP)
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(30)
    print("done; the broker stopped cleanly and its data is kept in", DATA)


if __name__ == "__main__":
    main()
