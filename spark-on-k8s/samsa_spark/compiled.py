"""`compiled`: numba's nopython compilation of the record loops, cached on disk where it can be.

numba caches a compiled function in a folder it can write: beside the source, the user's
cache, or ``NUMBA_CACHE_DIR``. Where none is writable (the package installed by root and run
by a container's non-root user, a read-only root filesystem), ``cache=True`` fails at import
with "no locator available"; the function is then compiled in each process instead, which
costs its first call a second or so and changes nothing else. The Spark image sets
``NUMBA_CACHE_DIR`` to a folder of its user's, warmed when the image is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba import njit


def compiled(fn: Callable[..., Any]) -> Any:
    try:
        return njit(cache=True, nogil=True)(fn)
    except RuntimeError as exc:
        if "no locator available" not in str(exc):
            raise
        return njit(nogil=True)(fn)
