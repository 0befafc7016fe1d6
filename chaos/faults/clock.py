"""Clock steps: one broker's wall clock jumps forward or back by seconds to hours, through
the offset file the broker re-reads (SAMSA_CLOCK_OFFSET_FILE); the machine's clock is never
touched. Healing sets the offset back to 0.

A step forward ages data (retention.ms, segment.ms, offsets and transactional expiry); a step
back must not break appends or make the log's max timestamp go back. Timeouts and liveness
run on monotonic time, so neither should cause an election or an ISR change."""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.faults.base import Environment

MIN_STEP_MS = 1_000
MAX_STEP_MS = 6 * 3_600_000


def write_offset(path: Path, offset_ms: int) -> None:
    """Replace the file's content at once, so the broker never reads half a number."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{offset_ms}\n")
    os.replace(tmp, path)


def draw_step_ms(rng: random.Random) -> int:
    """A step of 1 s to 6 h, log-uniform (as many seconds-long as hours-long), either way."""
    magnitude = math.exp(rng.uniform(math.log(MIN_STEP_MS), math.log(MAX_STEP_MS)))
    return rng.choice((-1, 1)) * int(magnitude)


@dataclass
class ClockStep:
    broker: int
    path: Path
    offset_ms: int
    kind: str = "clock-step"

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": self.broker,
            "offset_ms": self.offset_ms,
            "direction": "forward" if self.offset_ms > 0 else "back",
        }

    def heal(self) -> None:
        write_offset(self.path, 0)


class ClockStepKind:
    """Step one broker's clock (chosen at random) by a random signed offset."""

    name = "clock-step"

    def applicable(self, env: Environment) -> bool:
        return bool(env.brokers)

    def inject(self, env: Environment, rng: random.Random) -> ClockStep:
        broker = rng.choice(env.brokers)
        step = ClockStep(broker, env.clock_file(broker), draw_step_ms(rng))
        write_offset(step.path, step.offset_ms)
        return step


KINDS = [ClockStepKind()]
