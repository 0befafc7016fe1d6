"""``python -m fuzz`` (``make fuzz``): every harness in turn, each in its own process, for its
share of the inputs; prints the inputs each ran, the total and the wall time.  A crash or a
hang (an input over ``--timeout`` seconds) in any target fails the run, with libFuzzer's
report and the input's file left in the working directory.

    python -m fuzz [--scale 1.0] [--timeout 10] [TARGET ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from fuzz.harness import FAST_TMP

# Inputs per target at scale 1: over a million in all.  The decoders are cheap per input,
# recovery (a partition directory written and opened per input) is not.
BUDGET = {"requests": 500_000, "records": 400_000, "sasl": 100_000, "recovery": 40_000}
_DONE = re.compile(r"Done (\d+) (?:runs )?in (\d+) second")


def run_target(target: str, runs: int, timeout: int) -> tuple[int, float, str]:
    """(inputs run, seconds, libFuzzer's output); raises SystemExit on a crash or a hang."""
    started = time.monotonic()
    # libFuzzer ends the process without Python's clean-up: the harness's scratch files go
    # in a directory of this process's, removed here.
    scratch = tempfile.mkdtemp(prefix=f"samsa-fuzz-{target}-", dir=FAST_TMP)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                f"fuzz.{target}",
                f"-atheris_runs={runs}",
                f"-timeout={timeout}",
                "-rss_limit_mb=2048",
                "-print_final_stats=1",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "TMPDIR": scratch},
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - started
    output = done.stdout + done.stderr
    found = _DONE.search(output)
    if done.returncode != 0 or found is None:
        tail = "\n".join(
            line for line in output.splitlines() if not line.startswith("INFO: Instrumenting")
        )
        print(tail[-6000:], file=sys.stderr)
        raise SystemExit(f"fuzz.{target} failed (exit {done.returncode}) after {elapsed:.0f}s")
    return int(found.group(1)), elapsed, output


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m fuzz")
    parser.add_argument("targets", nargs="*", default=list(BUDGET))
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every budget")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    args = parser.parse_args()
    total, started = 0, time.monotonic()
    for target in args.targets:
        runs = max(1, int(BUDGET[target] * args.scale))
        count, elapsed, _ = run_target(target, runs, args.timeout)
        total += count
        print(f"{target:10} {count:>10,} inputs in {elapsed:7.1f}s  ({count / elapsed:,.0f}/s)")
    wall = time.monotonic() - started
    print(f"{'total':10} {total:>10,} inputs in {wall:7.1f}s, no crash, no hang")


if __name__ == "__main__":
    main()
