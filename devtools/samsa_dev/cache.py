"""Where fetched things live: ``${XDG_CACHE_HOME:-~/.cache}/samsa/``, never the work tree."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "samsa"
