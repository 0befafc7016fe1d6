"""The suite's files, longest first, for pytest-xdist's ``--dist loadfile``.

xdist hands whole files to whichever worker is free, in collection order (with
``--no-loadscope-reorder``; by default it orders them by their number of tests, which put the
files of one long test, such as the Spark operator's or a kill loop's, last, so that a run's
final minutes were one of them on one worker while the other stood idle). Handing out the
longest first leaves only short files for the end, and the workers finish together.

The expected seconds of each file come from ``test-durations.json`` at the repository root,
written from a run's JUnit report by ``python -m samsa_dev.test_order REPORT.xml``. A file it
does not list counts as short, and files keep their own order among equals, so a new or
renamed file is never lost, only scheduled as if quick. The plugin is registered in the
root pyproject's pytest ``addopts``.

Files on the run's shared Kubernetes control plane go before all others (longest first among
themselves): the plane stops once the last of them is done (samsa_dev.kube.harness), instead
of idling through the rest of the run at a fifth of a core.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = "test-durations.json"
UNLISTED_S = 1.0
# The session fixtures whose files go first, so that what they hold can stop early.
EARLY_FIXTURES = ("kube_control_plane",)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load(root: Path) -> dict[str, float]:
    try:
        data = json.loads((root / DURATIONS).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()}


def longest_first(
    nodeids: list[str], seconds: dict[str, float], early: frozenset[str] = frozenset()
) -> list[int]:
    """The order (indexes into ``nodeids``) that puts the `early` files first, then files of
    more expected seconds first, each file's tests together and in their own order."""
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(_file_of(nodeid), i)
    files = sorted(
        first_seen,
        key=lambda f: (f not in early, -seconds.get(f, UNLISTED_S), first_seen[f]),
    )
    rank = {f: n for n, f in enumerate(files)}
    return sorted(range(len(nodeids)), key=lambda i: (rank[_file_of(nodeids[i])], i))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = load(config.rootpath)
    if not seconds:
        return
    early = frozenset(
        _file_of(item.nodeid)
        for item in items
        if any(f in getattr(item, "fixturenames", ()) for f in EARLY_FIXTURES)
    )
    order = longest_first([item.nodeid for item in items], seconds, early)
    items[:] = [items[i] for i in order]


def from_junit(report: Path) -> dict[str, float]:
    """Seconds per test file in a JUnit report (pytest's --junitxml), rounded."""
    per_file: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        # pytest writes "a.b.test_x" for a/b/test_x.py (".TestClass" after it for a class's
        # tests); folders with dashes keep them.
        module = (case.get("classname") or "").split(".")
        if len(module) > 1 and module[-1].startswith("Test"):
            module.pop()
        per_file["/".join(module) + ".py"] += float(case.get("time") or 0)
    return {f: round(s) for f, s in sorted(per_file.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m samsa_dev.test_order REPORT.xml", file=sys.stderr)
        return 2
    seconds = from_junit(Path(argv[0]))
    Path(DURATIONS).write_text(json.dumps(seconds, indent=1, sort_keys=True) + "\n")
    print(f"{DURATIONS}: {len(seconds)} files, {sum(seconds.values())} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
