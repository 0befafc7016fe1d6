"""The client matrix's programs in other languages, made ready once and kept.

- A Go program (franz-go), a folder with ``go.mod``, ``go.sum`` and ``*.go``: ``go build``
  through the Go module proxy into ``<cache>/go/bin/<name>-<hash of its sources>``, with Go's
  module and build caches under ``<cache>/go``. Changing a source builds anew; a second run
  builds nothing.
- A Node program (kafkajs), a folder with ``package.json`` and ``package-lock.json``: ``npm
  ci`` into its ``node_modules`` (which git ignores), npm's cache under ``<cache>/npm``, and
  a stamp naming the lock file's hash, so that a second run installs nothing.

Tests ask for a program with ``go_program`` or ``node_program``; a program not made ready is
an error that says to run ``make setup``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from samsa_dev.cache import cache_root, locked

# Where the Go distribution's installer puts it, when it is not on PATH.
GO_FALLBACK = Path("/usr/local/go/bin/go")
NODE_STAMP = ".samsa-lock-sha256"


class ProgramUnavailable(RuntimeError):
    """The program is not built (or installed) here, or cannot be."""


def _digest(files: list[Path], root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def go_sources(folder: Path) -> list[Path]:
    return [folder / "go.mod", folder / "go.sum", *folder.glob("*.go")]


def _go_name(folder: Path) -> str:
    """The program's name as ``go build`` gives it: the last element of its module path."""
    module = re.search(r"^module\s+(\S+)", (folder / "go.mod").read_text(), re.MULTILINE)
    return module.group(1).rsplit("/", 1)[-1] if module else folder.name


def go_binary(folder: Path) -> Path:
    """Where the Go program in ``folder`` is (or will be) built, keyed by its sources."""
    digest = _digest(go_sources(folder), folder)[:16]
    return cache_root() / "go" / "bin" / f"{_go_name(folder)}-{digest}"


def _tool(name: str, fallback: Path | None = None) -> str:
    found = shutil.which(name)
    if found is None and fallback is not None and fallback.exists():
        found = str(fallback)
    if found is None:
        raise ProgramUnavailable(f"{name} is not installed (it is needed to build {name} programs)")
    return found


def go_module_cache() -> Path:
    return cache_root() / "go" / "mod"


def go_environment() -> dict[str, str]:
    """Go's caches in ours, the installed toolchain only, and go.sum as committed."""
    go = cache_root() / "go"
    return {
        **os.environ,
        "GOMODCACHE": str(go_module_cache()),
        "GOCACHE": str(go / "build"),
        "GOTOOLCHAIN": "local",
        # -modcacherw: the module cache can be removed like any other cache.
        "GOFLAGS": "-mod=readonly -modcacherw -buildvcs=false",
        "CGO_ENABLED": "0",
    }


def build_go(folder: Path) -> tuple[Path, bool]:
    """The program's binary, and whether it was built now (False: it was in the cache)."""
    target = go_binary(folder)
    if target.exists():
        return target, False
    with locked(target.with_name(target.name + ".lock")):
        if target.exists():  # built while we waited
            return target, False
        _build_go(folder, target)
    # Builds of other sources are kept (tens of megabytes each), as the Java programs' are:
    # another checkout of the project, a worktree, may be running its tests on one of them.
    return target, True


def _build_go(folder: Path, target: Path) -> None:
    go = _tool("go", GO_FALLBACK)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    result = subprocess.run(
        [go, "build", "-trimpath", "-o", str(partial), "."],
        cwd=folder,
        env=go_environment(),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = " | ".join(result.stderr.strip().splitlines()[-5:])
        raise ProgramUnavailable(f"go build of {folder} failed: {tail}")
    os.replace(partial, target)


def go_program(folder: Path) -> Path:
    """The built program, or ProgramUnavailable naming ``make setup``."""
    target = go_binary(folder)
    if not target.exists():
        raise ProgramUnavailable(
            f"the Go program {folder.name} is not built for its current sources "
            f"(expected {target}): run `make setup`"
        )
    return target


def _lock_digest(folder: Path) -> str:
    return _digest([folder / "package-lock.json"], folder)


def node_installed(folder: Path) -> bool:
    stamp = folder / "node_modules" / NODE_STAMP
    return stamp.exists() and stamp.read_text().strip() == _lock_digest(folder)


def install_node(folder: Path) -> bool:
    """``npm ci`` unless node_modules already matches the lock file; True if it ran."""
    if node_installed(folder):
        return False
    npm = _tool("npm")
    result = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--cache", str(cache_root() / "npm")],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        tail = " | ".join(result.stderr.strip().splitlines()[-5:])
        raise ProgramUnavailable(f"npm ci in {folder} failed: {tail}")
    (folder / "node_modules" / NODE_STAMP).write_text(_lock_digest(folder) + "\n")
    return True


def node_program(folder: Path, script: str) -> list[str]:
    """The command that runs ``script`` with its modules installed, or ProgramUnavailable."""
    if not node_installed(folder):
        raise ProgramUnavailable(
            f"the Node program {folder.name} has no node_modules for its package-lock.json: "
            "run `make setup`"
        )
    return [_tool("node"), str(folder / script)]


def prepare(root: Path) -> list[tuple[Path, str]]:
    """Every program under ``root`` made ready: each folder with a go.mod is built, each with
    a package-lock.json installed. Returns each folder with what was done."""
    done: list[tuple[Path, str]] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if (folder / "go.mod").exists():
            binary, built = build_go(folder)
            done.append((folder, f"{'built' if built else 'cached'}: {binary}"))
        if (folder / "package-lock.json").exists():
            ran = install_node(folder)
            done.append((folder, "npm ci done" if ran else "node_modules up to date"))
    return done
