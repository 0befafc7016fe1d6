"""Where fetched things live: ``${XDG_CACHE_HOME:-~/.cache}/samsa/``, never the work tree;
and the lock that lets two checkouts (a worktree, a second `make setup`) fill it at once."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "samsa"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (made if need be) across processes: builds
    into the cache stage under fixed names, so two at once would remove each other's work."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
