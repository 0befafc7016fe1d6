"""Two checkouts (a worktree, a second `make setup`) filling the cache at once: both get the
program, built once, and neither removes the other's work in progress."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from samsa_dev.cache import cache_root

BUILD = """
import json, sys
from pathlib import Path
from samsa_dev.programs import build_go
path, built = build_go(Path(sys.argv[1]))
print(json.dumps({"path": str(path), "built": built, "runs": path.exists()}))
"""


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (make setup)")
def test_two_builds_of_one_go_program_at_once_both_get_it_and_it_is_built_once(
    tmp_path: Path,
) -> None:
    program = tmp_path / "src"
    program.mkdir()
    (program / "go.mod").write_text("module racer\n\ngo 1.22\n")
    (program / "go.sum").write_text("")
    (program / "main.go").write_text("package main\n\nfunc main() {}\n")
    cache = tmp_path / "cache"
    # Go's own build cache is shared with the machine's, so the compiler's work is warm; the
    # cache folder the two builds race over is this test's.
    shared = cache_root() / "go" / "build"
    shared.mkdir(parents=True, exist_ok=True)
    (cache / "samsa" / "go").mkdir(parents=True)
    (cache / "samsa" / "go" / "build").symlink_to(shared)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD, str(program)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = []
    for run in runs:
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["runs"] for r in results), results
    assert results[0]["path"] == results[1]["path"]
    assert sorted(r["built"] for r in results) == [False, True], results
    subprocess.run([results[0]["path"]], check=True, timeout=30)
