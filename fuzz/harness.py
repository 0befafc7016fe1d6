"""What every harness shares: its seed corpus's directory and how atheris is started.

A harness module defines ``one_input(data: bytes)``, which returns normally for every input
the broker handles as it should (decoded, or refused with the broker's own error) and raises
anything else: atheris reports a raised exception as a crash, with the input that caused it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"
# In memory where the machine has it: the recovery harness writes a directory per input.
FAST_TMP = "/dev/shm" if Path("/dev/shm").is_dir() else None


def scratch_dir(prefix: str) -> Path:
    """A new temporary directory: under $TMPDIR when set (``python -m fuzz`` sets one it
    removes afterwards), else in memory where the machine allows."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=None if "TMPDIR" in os.environ else FAST_TMP))


def corpus_dir(target: str) -> Path:
    return CORPUS / target


def instrument_modules(*names: str) -> int:
    """Instrument for coverage every function and method of modules already imported, where
    atheris's import hook cannot rewrite a whole module; returns how many functions took it."""
    import importlib
    import inspect

    import atheris

    done = 0
    for name in names:
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module):
            owners = [obj] if inspect.isclass(obj) and obj.__module__ == name else []
            functions = [obj] if inspect.isfunction(obj) and obj.__module__ == name else []
            for owner in owners:
                functions += [f for f in vars(owner).values() if inspect.isfunction(f)]
            for function in functions:
                try:
                    atheris.instrument_func(function)
                    done += 1
                except Exception:
                    continue
    return done


def main(target: str, one_input: Callable[[bytes], None]) -> None:
    """Run atheris over ``argv``; with no corpus directory given, over the target's own seeds.

    libFuzzer writes the new inputs it finds into the first corpus directory: without one
    given, that is a temporary directory, so that the seeds in the repository stay as they are.
    """
    import atheris

    argv = list(sys.argv)
    if not any(not arg.startswith("-") for arg in argv[1:]):
        argv += [str(scratch_dir(f"samsa-fuzz-{target}-")), str(corpus_dir(target))]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()
