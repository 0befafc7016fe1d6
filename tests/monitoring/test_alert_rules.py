"""The chart's alert rules checked by Prometheus's own promtool: the rule file is valid, and
its unit tests (rules_test.yaml) pass, with a test for every alert that fires and one where it
stays quiet."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from monitoring_support import RULES, promtool

UNIT_TESTS = Path(__file__).resolve().parent / "rules_test.yaml"


def test_promtool_checks_the_rule_file() -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_unit_tests_pass_and_cover_every_alert_both_ways() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert {
        "UnderReplicatedPartitions",
        "OfflinePartitions",
        "UnderMinIsr",
        "NoActiveController",
        "ConsumerLagRising",
        "DiskFilling",
    } <= alerts
    fires, quiet = set(), set()
    for case in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert fires == alerts, f"alerts never shown firing: {alerts - fires}"
    assert quiet == alerts, f"alerts never shown quiet: {alerts - quiet}"

    # Run where the file is: its rule_files path is relative to it.
    done = subprocess.run(
        [promtool(), "test", "rules", UNIT_TESTS.name],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=UNIT_TESTS.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
