"""Helpers shared by the operator's tests (a uniquely named module: every test folder of the
workspace has its own conftest.py, so tests import from here, never from conftest).

The operator itself runs on the real control plane in tests/integration; these tests need no
API server (the builders, CRDs, chart and decisions are pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
EXAMPLES = REPO / "examples"
CHART = REPO / "helm" / "samsa-operator"
CRDS = REPO / "crds"

K8S_VERSIONS = ["1.29.0", "1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0"]


def tool(name: str) -> str:
    path = TOOLS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make tools` (part of `make setup`)")
    return str(path)


@pytest.fixture(scope="session")
def helm() -> str:
    return tool("helm")


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]
