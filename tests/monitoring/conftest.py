"""The monitoring kit's tests use the session's 3-broker Samsa cluster (samsa's pytest plugin),
the broker tests' helpers and the operator tests' real helm, put on the path here."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for folder in ("broker_image/tests", "operator/tests", "tests/monitoring"):
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))

from op_support import helm  # noqa: E402, F401
