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

Files that use a session fixture costly to start (a SparkSession's JVM, the shared 3-broker
cluster, the Apache Kafka and Samsa pair) form one group, handed whole to one worker, so each
such fixture starts once per run instead of once per worker; once the worker is done with the
group, the fixtures stop instead of idling to the end (an idle 3-broker cluster costs about
4 % of a core). Files sharing any such fixture are one group. The workers name the groups they
collected in a file that the controller's scheduler reads (``SAMSA_TEST_GROUPS``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DURATIONS = "test-durations.json"
UNLISTED_S = 1.0
# The session fixtures whose files go first, so that what they hold can stop early.
EARLY_FIXTURES = ("kube_control_plane",)
# The session fixtures whose files run as one group on one worker, stopped once it is done.
SHARED_FIXTURES = ("spark", "samsa_cluster", "pair")
GROUPS_ENV = "SAMSA_TEST_GROUPS"


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load(root: Path) -> dict[str, float]:
    try:
        data = json.loads((root / DURATIONS).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()}


def longest_first(
    nodeids: list[str],
    seconds: dict[str, float],
    early: frozenset[str] = frozenset(),
    groups: dict[str, str] | None = None,
) -> list[int]:
    """The order (indexes into ``nodeids``) that puts the `early` files first, then units of
    more expected seconds first, each unit's files together, each file's tests together and
    in their own order. A unit is a group of `groups` (file: group), its seconds the sum of its
    files', or else a file."""
    groups = groups or {}
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(_file_of(nodeid), i)
    unit_seconds: dict[str, float] = defaultdict(float)
    unit_early: set[str] = set()
    unit_first: dict[str, int] = {}
    for f in first_seen:  # in collection order, so a unit's first file is seen first
        unit = groups.get(f, f)
        unit_first.setdefault(unit, first_seen[f])
        unit_seconds[unit] += seconds.get(f, UNLISTED_S)
        if f in early:
            unit_early.add(unit)

    def key(f: str) -> tuple[bool, float, int, float, int]:
        unit = groups.get(f, f)
        return (
            unit not in unit_early,
            -unit_seconds[unit],
            unit_first[unit],
            -seconds.get(f, UNLISTED_S),
            first_seen[f],
        )

    rank = {f: n for n, f in enumerate(sorted(first_seen, key=key))}
    return sorted(range(len(nodeids)), key=lambda i: (rank[_file_of(nodeids[i])], i))


def group_files(uses: dict[str, set[str]]) -> dict[str, str]:
    """file: group, for the files that use a shared fixture (`uses`: file to the shared
    fixtures it uses); files sharing any fixture, directly or through others, are one group,
    named by its fixtures."""
    fixture_group: dict[str, set[str]] = {}
    for fixtures in uses.values():
        merged = set(fixtures)
        for fixture in fixtures:
            merged |= fixture_group.get(fixture, set())
        for fixture in merged:
            fixture_group[fixture] = merged
    return {
        f: "+".join(sorted(fixture_group[next(iter(fixtures))]))
        for f, fixtures in uses.items()
        if fixtures
    }


def _groups_of(items: list[pytest.Item]) -> dict[str, str]:
    uses: dict[str, set[str]] = defaultdict(set)
    for item in items:
        uses[_file_of(item.nodeid)] |= set(getattr(item, "fixturenames", ())) & set(SHARED_FIXTURES)
    return group_files(uses)


def _publish(groups: dict[str, str]) -> None:
    """For the controller's scheduler: every worker collects the same tests and writes the
    same map, each by a rename, so a reader never sees half of one."""
    path = os.environ.get(GROUPS_ENV)
    if not path:
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as out:
        json.dump(groups, out)
    os.replace(tmp, path)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = _groups_of(items)
    _publish(groups)
    config.stash[_GROUPS] = groups
    seconds = load(config.rootpath)
    if not seconds:
        return
    early = frozenset(
        _file_of(item.nodeid)
        for item in items
        if any(f in getattr(item, "fixturenames", ()) for f in EARLY_FIXTURES)
    )
    order = longest_first([item.nodeid for item in items], seconds, early, groups)
    items[:] = [items[i] for i in order]


_GROUPS = pytest.StashKey[dict[str, str]]()
_SHARED_DEFS = pytest.StashKey[list[Any]]()


def pytest_configure(config: pytest.Config) -> None:
    # The controller of an xdist run (it has workers, and is none): where they name the groups.
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        folder = tempfile.mkdtemp(prefix="samsa-test-groups-")
        os.environ[GROUPS_ENV] = os.path.join(folder, "groups.json")
    config.stash[_SHARED_DEFS] = []


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with each group of files one unit of work."""
    if config.getvalue("dist") != "loadfile" or GROUPS_ENV not in os.environ:
        return None
    # xdist ships no type information (no py.typed marker).
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    path = Path(os.environ[GROUPS_ENV])

    class GroupedFileScheduling(LoadScopeScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            # Called once every worker has collected, so the map is written by then.
            if self._groups is None:
                try:
                    self._groups = json.loads(path.read_text())
                except (OSError, ValueError):
                    self._groups = {}
            f = _file_of(nodeid)
            return self._groups.get(f, f)

    return GroupedFileScheduling(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield
    # The shared fixtures this test set up, to stop once its group is done.
    if not isinstance(item, pytest.Function):
        return
    defs = item.config.stash.get(_SHARED_DEFS, [])
    for name in SHARED_FIXTURES:
        for fixturedef in item._fixtureinfo.name2fixturedefs.get(name, ()):
            if fixturedef not in defs:
                defs.append(fixturedef)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    if nextitem is None or not isinstance(item, pytest.Function):
        return  # the session's end stops them as usual
    groups = item.config.stash.get(_GROUPS, {})
    group = groups.get(_file_of(item.nodeid))
    if group is None or groups.get(_file_of(nextitem.nodeid)) == group:
        return
    # The group is done on this worker, and no other file uses its fixtures.
    defs = item.config.stash.get(_SHARED_DEFS, [])
    while defs:
        # pytest's own teardown of a fixture (its finalizers, then its dependents'); the
        # session's end finds it finished. Should a later test ask for it, it starts again.
        defs.pop().finish(item._request)


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
