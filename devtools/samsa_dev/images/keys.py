"""The pure part of `make images`: which context files a Containerfile reads, and an image's
cache key, the sha256 of everything its build depends on. No I/O beyond reading the files
named; nothing here runs a builder."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from samsa_dev.programs import _digest

# What a build context never holds (the repository's .dockerignore says the same for docker).
IGNORED_PARTS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo")


def instructions(containerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) for each instruction, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\[ \t]*\n", " ", containerfile)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        found.append((word.upper(), rest.strip()))
    return found


def copied_sources(containerfile: str) -> list[str]:
    """The context paths that COPY and ADD read: not ``COPY --from=`` (another stage or
    image), not URLs (ADD fetches those; a checksum in the Containerfile pins them). ``$NAME``
    and ``${NAME}`` take the default of the Containerfile's ``ARG NAME=...``."""
    sources: list[str] = []
    defaults: dict[str, str] = {}
    for word, rest in instructions(containerfile):
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            defaults[name.strip()] = value.strip().strip('"')
        if word not in ("COPY", "ADD"):
            continue
        rest = re.sub(r"\$\{?(\w+)\}?", lambda m: defaults.get(m.group(1), m.group(0)), rest)
        leading = re.match(r"((?:--\S+\s+)*)(.*)", rest)
        assert leading is not None  # the pattern matches any text
        flags, body = leading.group(1).split(), leading.group(2)
        if any(f.startswith("--from") for f in flags):
            continue
        operands = json.loads(body) if body.startswith("[") else shlex.split(body)
        for source in operands[:-1]:
            if not re.match(r"^[a-z]+://", source):
                sources.append(source.removeprefix("./"))
    return sources


def ignored(path: Path) -> bool:
    return bool(IGNORED_PARTS.intersection(path.parts)) or path.name.endswith(IGNORED_SUFFIXES)


def context_files(root: Path, sources: Iterable[str]) -> list[Path]:
    """Every file under ``root`` that the sources name (a folder: each file in it), without
    what a build context never holds. A source that names nothing is an error."""
    files: set[Path] = set()
    for source in sources:
        matches = sorted(root.glob(source)) if any(c in source for c in "*?[") else [root / source]
        matches = [m for m in matches if m.exists()]
        if not matches:
            raise FileNotFoundError(f"the build context has no {source} (under {root})")
        for match in matches:
            if match.is_dir():
                files.update(
                    f for f in match.rglob("*") if f.is_file() and not ignored(f.relative_to(root))
                )
            else:
                files.add(match)
    return sorted(files)


def context_digest(root: Path, files: Iterable[Path]) -> str:
    """The sha256 of the files' paths (relative to ``root``) and contents."""
    return _digest(list(files), root)


def image_key(
    *,
    ref: str,
    containerfile: bytes,
    context: str,
    args: Mapping[str, str],
    bases: Mapping[str, str],
    pins: Mapping[str, str],
    builder: str,
) -> str:
    """An image's cache key: the sha256 of its ref, its Containerfile, its context's digest,
    its build arguments, the keys of the images it builds on, the pinned versions (and
    digests) of what its build fetches or stages, and the builder's version."""
    document = {
        "ref": ref,
        "containerfile": hashlib.sha256(containerfile).hexdigest(),
        "context": context,
        "args": dict(sorted(args.items())),
        "bases": dict(sorted(bases.items())),
        "pins": dict(sorted(pins.items())),
        "builder": builder,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
