"""A real Prometheus (Debian's) for the tests: started on a free port with its data in a temp
dir, scraping the targets it is given every second and evaluating the rules it is given, and
asked through its HTTP API; and the metric names a PromQL expression reads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from samsa.local_cluster.ports import free_port

START_TIMEOUT = 60.0

# Aggregations, operators and modifiers: words in PromQL that are not metric names.
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
# Grafana's variables, as a dashboard's queries reach Prometheus.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$namespace": ".*",
    "$kafka_cluster": ".*",
    "$stage": ".*",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: words that are not functions (followed
    by a parenthesis), label matchers, grouping labels, range durations, strings or keywords."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", e):
        if e[m.end() :].lstrip().startswith("(") or m.group().lower() in PROMQL_WORDS:
            continue
        names.add(m.group())
    return names


def as_sent(expr: str) -> str:
    """A dashboard's query with Grafana's variables replaced as Grafana replaces them."""
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every panel's PromQL, and the metrics of its variables' label_values() queries."""
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("definition") or ""
        exprs += re.findall(r"label_values\(([^,]+),", query)
    return [as_sent(e) for e in exprs]


class Prometheus:
    """A Prometheus process; ``stop`` ends it."""

    def __init__(
        self, workdir: Path, scrape: dict[str, list[str]], rules: Path, labels: dict[str, str]
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is missing: run `make setup` (Debian's prometheus package)")
        workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {
                "scrape_interval": "1s",
                "evaluation_interval": "1s",
                "scrape_timeout": "1s",
            },
            "rule_files": [str(rules)],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": targets, "labels": labels}]}
                for job, targets in scrape.items()
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = (workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready():
            assert self.process.poll() is None, f"prometheus exited: see {self._log.name}"
            assert time.monotonic() < deadline, "prometheus not ready in time"
            time.sleep(0.1)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as r:
            answer = json.load(r)
        assert answer["status"] == "success", answer
        return answer["data"]

    def names(self) -> set[str]:
        return set(self.api("label/__name__/values"))

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._log.close()
