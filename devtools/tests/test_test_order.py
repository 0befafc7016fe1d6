"""The suite's files are handed to xdist's workers longest first, each file's tests together
and in their own order; a file the durations table does not know counts as short."""

from __future__ import annotations

from pathlib import Path

from samsa_dev.test_order import from_junit, group_files, longest_first


def test_files_go_longest_first_and_keep_their_tests_in_order() -> None:
    ids = ["a.py::t1", "a.py::t2", "b.py::t1", "c.py::t1", "c.py::t2", "new.py::t"]
    seconds = {"a.py": 5.0, "b.py": 300.0, "c.py": 40.0}
    ordered = [ids[i] for i in longest_first(ids, seconds)]
    assert ordered == ["b.py::t1", "c.py::t1", "c.py::t2", "a.py::t1", "a.py::t2", "new.py::t"]


def test_early_files_go_first_and_longest_first_among_themselves() -> None:
    ids = ["a.py::t", "b.py::t", "k1.py::t", "k2.py::t"]
    seconds = {"a.py": 5.0, "b.py": 300.0, "k1.py": 1.0, "k2.py": 40.0}
    ordered = [ids[i] for i in longest_first(ids, seconds, frozenset({"k1.py", "k2.py"}))]
    assert ordered == ["k2.py::t", "k1.py::t", "b.py::t", "a.py::t"]


def test_files_sharing_a_costly_fixture_form_one_group_and_run_together() -> None:
    uses = {
        "s/a.py": {"spark"},
        "c/x.py": {"samsa_cluster"},
        "s/b.py": {"spark", "samsa_cluster"},
        "p/y.py": {"pair"},
        "z.py": set(),
    }
    groups = group_files(uses)
    assert groups == {
        "s/a.py": "samsa_cluster+spark",
        "c/x.py": "samsa_cluster+spark",
        "s/b.py": "samsa_cluster+spark",
        "p/y.py": "pair",
    }
    ids = ["s/a.py::t", "big.py::t", "c/x.py::t", "z.py::t", "s/b.py::t", "p/y.py::t"]
    seconds = {"s/a.py": 30.0, "big.py": 100.0, "c/x.py": 50.0, "s/b.py": 40.0, "p/y.py": 10.0}
    ordered = [ids[i] for i in longest_first(ids, seconds, groups=groups)]
    # The group's 120 s go before the longest file's 100, its files together, longest first.
    assert ordered == ["c/x.py::t", "s/b.py::t", "s/a.py::t", "big.py::t", "p/y.py::t", "z.py::t"]


def test_without_a_table_the_collection_order_stays() -> None:
    ids = ["z.py::t", "a.py::t", "m.py::t"]
    assert longest_first(ids, {}) == [0, 1, 2]


def test_a_junit_report_gives_seconds_per_file(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="spark-on-k8s.tests.test_sink" name="test_a" time="10.4"/>'
        '<testcase classname="spark-on-k8s.tests.test_sink" name="test_b[x]" time="2.0"/>'
        '<testcase classname="tests.integration.test_roll" name="test_c" time="99.6"/>'
        "</testsuite></testsuites>"
    )
    assert from_junit(report) == {
        "spark-on-k8s/tests/test_sink.py": 12,
        "tests/integration/test_roll.py": 100,
    }
