"""The data path's request schemas load in the background, one per loop turn, so the first
Fetch of a fresh broker does not wait for kio's imports and no request waits for all of them."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

from samsa.protocol.schema_preload import DATA_PATH

# A fresh interpreter: the test process has loaded schemas of its own.
PROGRAM = """
import asyncio, json, sys
from samsa.protocol.schema_preload import warm_up

loaded = lambda: sorted(m for m in sys.modules if m.startswith("kio.schema.") and
                        m.endswith(".request"))
before = loaded()
seen = []

async def main():
    loop = asyncio.get_running_loop()
    warm_up(loop)
    # Another callback gets turns while the schemas load.
    for _ in range(20):
        seen.append(len(loaded()))
        await asyncio.sleep(0)

asyncio.run(main())
print(json.dumps({"before": before, "after": loaded(), "seen": seen}))
"""


def test_data_path_schemas_load_in_turns() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    names = {"0": "produce", "1": "fetch", "2": "list_offsets", "3": "metadata"}
    wanted = {f"kio.schema.{names[str(key)]}.v{version}.request" for key, version in DATA_PATH}
    assert not wanted & set(result["before"])
    assert wanted <= set(result["after"])
    # One at a time, with the loop free in between.
    counts = result["seen"]
    assert counts[-1] - counts[0] >= len(wanted) - 1
    assert all(b - a <= 1 for a, b in itertools.pairwise(counts))
