"""Pinned jars from Maven Central, fetched once into the cache.

Each set of jars is a small pom in ``samsa_dev/maven/<set>.xml``. ``fetch(set)`` copies the
set's dependencies into ``<cache>/jars/<set>-<hash of the pom>/`` with Maven, so changing a pin
fetches anew and a second run fetches nothing; ``files(set)`` lists the jars (Spark's
``spark.jars``), ``classpath(set)`` makes a Java classpath of them. Maven's own repository is
kept in ``<cache>/m2`` so that sets share what they have in common.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from samsa_dev.cache import cache_root, locked

COMPLETE = ".complete"


class JarsUnavailable(RuntimeError):
    """The jars are not in the cache and cannot be fetched here."""


def sets() -> list[str]:
    """The names of the jar sets this checkout pins."""
    folder = resources.files("samsa_dev") / "maven"
    return sorted(p.name.removesuffix(".xml") for p in folder.iterdir() if p.name.endswith(".xml"))


def pom(name: str) -> bytes:
    path = resources.files("samsa_dev") / "maven" / f"{name}.xml"
    if not path.is_file():
        raise JarsUnavailable(f"no jar set named {name!r}; known: {', '.join(sets())}")
    return path.read_bytes()


def pinned_version(name: str, artifact: str) -> str:
    """The version a set pins for `artifact` (its artifactId), e.g. Kafka's for reports."""
    from xml.etree import ElementTree

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    for dep in ElementTree.fromstring(pom(name)).iterfind(".//m:dependency", ns):
        if dep.findtext("m:artifactId", namespaces=ns) == artifact:
            return dep.findtext("m:version", default="", namespaces=ns)
    raise JarsUnavailable(f"jar set {name!r} pins no {artifact!r}")


def directory(name: str) -> Path:
    """Where the set's jars are (or will be) kept."""
    digest = hashlib.sha256(pom(name)).hexdigest()[:12]
    return cache_root() / "jars" / f"{name}-{digest}"


def is_fetched(name: str) -> bool:
    return (directory(name) / COMPLETE).exists()


def fetch(name: str, quiet: bool = True) -> Path:
    """The set's jar directory, fetching it first if the cache lacks it."""
    target = directory(name)
    if (target / COMPLETE).exists():
        return target / "lib"
    with locked(target.with_name(target.name + ".lock")):
        if not (target / COMPLETE).exists():  # or fetched while we waited
            _fetch(name, target, quiet)
    return target / "lib"


def _fetch(name: str, target: Path, quiet: bool) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsUnavailable(
            f"the {name} jars are not cached and Maven is not installed (run `make setup`)"
        )
    target.mkdir(parents=True, exist_ok=True)
    staging = target / "lib.partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="samsa-mvn-") as work:
        (Path(work) / "pom.xml").write_bytes(pom(name))
        command = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            f"-Dmaven.repo.local={cache_root() / 'm2'}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
        ]
        result = subprocess.run(command, cwd=work, capture_output=quiet, text=True)
    if result.returncode != 0:
        tail = (result.stdout or "").strip().splitlines()[-5:] if quiet else []
        raise JarsUnavailable(f"Maven could not fetch the {name} jars: {' | '.join(tail)}")
    shutil.rmtree(target / "lib", ignore_errors=True)
    os.replace(staging, target / "lib")
    (target / COMPLETE).write_text("")


def files(*names: str) -> list[Path]:
    """Every jar of the given sets, fetched if need be: for ``spark.jars`` and the like."""
    return sorted(jar for name in names for jar in fetch(name).glob("*.jar"))


def classpath(*names: str) -> str:
    """A Java classpath of every jar in the given sets, fetched if need be."""
    return os.pathsep.join(str(fetch(n) / "*") for n in names)


def main(argv: list[str] | None = None) -> int:
    """``python -m samsa_dev.jars [set ...]``: fetch the named sets (all by default)."""
    import sys

    names = (argv if argv is not None else sys.argv[1:]) or sets()
    for name in names:
        already = is_fetched(name)
        try:
            where = fetch(name)
        except JarsUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{name}: {'cached' if already else 'fetched'} in {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
