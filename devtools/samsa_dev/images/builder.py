"""The I/O of `make images`: each image's inputs read and keyed (keys.py), its context staged,
buildah run, the result exported once as an OCI archive into its cache entry.

Cache (``<cache>/images/``):

- ``<name>-<key[:16]>/``: one entry per built image: ``image.tar`` (an oci-archive that
  ``ctr -n k8s.io images import`` takes, keeping the ref), ``entry.json`` (ref, key, inputs,
  size, build time; written last: an entry without it is not there), ``build.log``, and for a
  Debian base ``packages.txt`` (``dpkg-query -W`` of its root filesystem);
- ``buildah/``: buildah's own storage (``--root``/``--runroot``), where bases and the layer
  cache live. An image whose entry exists but is missing there is loaded from its archive;
- ``downloads/``: uv's wheel from PyPI, checked against its pinned sha256.

buildah runs as root with ``--isolation chroot`` (host network: ``oci`` isolation would set up
CNI networks on the host) and the ``overlay`` driver; ``buildah rm --all`` after each build. A
RUN that downloads sees the host's CA bundle, mounted over the image's for the RUN only:
nothing of it stays in an image.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from samsa_dev import jars
from samsa_dev.cache import cache_root, locked
from samsa_dev.images import keys
from samsa_dev.images.catalogue import (
    BY_NAME,
    DEBIAN_HOOKS,
    DEBIAN_MIRRORS,
    DEBIAN_SUITE,
    DPKG_OPTIONS,
    UV_VERSION,
    UV_WHEEL,
    UV_WHEEL_SHA256,
    ZOOKEEPER_JARS,
    Image,
    named,
)
from samsa_dev.kube import build as kube_build
from samsa_dev.programs import GO_FALLBACK, ProgramUnavailable, _tool, go_environment

ENTRY = "entry.json"
ARCHIVE = "image.tar"
KEY_LABEL = "dev.samsa.images.key"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


class ImageBuildFailed(RuntimeError):
    """An image could not be built here (a tool missing, a build step failing)."""


def images_root() -> Path:
    return cache_root() / "images"


@dataclass(frozen=True)
class Entry:
    image: Image
    key: str

    @property
    def folder(self) -> Path:
        return images_root() / f"{self.image.name}-{self.key[:16]}"

    @property
    def archive(self) -> Path:
        return self.folder / ARCHIVE

    @property
    def built(self) -> bool:
        return (self.folder / ENTRY).exists() and self.archive.exists()

    def record(self) -> dict[str, object]:
        return json.loads((self.folder / ENTRY).read_text()) if self.built else {}


# -- keys -----------------------------------------------------------------------------------


def _buildah() -> str:
    found = shutil.which("buildah")
    if found is None:
        raise ImageBuildFailed("buildah is not installed (run `make setup`)")
    return found


def builder_version() -> str:
    out = subprocess.run([_buildah(), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _context_files(image: Image) -> list[Path]:
    root = image.context()
    if image.files:  # our own folder: all of it is context
        return sorted(f for f in root.rglob("*") if f.is_file() and not keys.ignored(f))
    text = image.containerfile_path().read_text()
    return [image.containerfile_path(), *keys.context_files(root, keys.copied_sources(text))]


def _pins(image: Image) -> dict[str, str]:
    pins = dict(image.pins)
    if image.debian:
        pins["debian"] = json.dumps(
            [
                DEBIAN_SUITE,
                sorted(image.packages),
                list(DEBIAN_MIRRORS),
                list(DPKG_OPTIONS),
                list(DEBIAN_HOOKS),
            ]
        )
    if image.stage == "zookeeper":
        pins["jars"] = hashlib.sha256(jars.pom(ZOOKEEPER_JARS)).hexdigest()
    return pins


def entries(names: list[str] | None = None) -> dict[str, Entry]:
    """Name -> cache entry (key computed from the inputs) of the images asked for and of the
    images they build on, in build order."""
    builder = builder_version()
    done: dict[str, Entry] = {}

    def visit(image: Image) -> Entry:
        if image.name in done:
            return done[image.name]
        bases = {arg: visit(BY_NAME[base]) for arg, base in image.bases.items()}
        files = _context_files(image)
        key = keys.image_key(
            ref=image.ref,
            containerfile=image.containerfile_path().read_bytes(),
            context=keys.context_digest(image.context(), files),
            args={**image.args, **{arg: e.image.ref for arg, e in bases.items()}},
            bases={arg: e.key for arg, e in bases.items()},
            pins=_pins(image),
            builder=builder,
        )
        done[image.name] = Entry(image, key)
        return done[image.name]

    for image in named(names):
        visit(image)
    return done


# -- buildah ---------------------------------------------------------------------------------


def _run(command: list[str], log: Path | None = None, **kwargs: object) -> str:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if log is not None:
        with log.open("a") as out:
            out.write(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}\n")
    if result.returncode != 0:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-8:])
        raise ImageBuildFailed(f"{command[0]} {command[1]} failed: {tail}")
    return str(result.stdout)


def buildah(*args: str, log: Path | None = None) -> str:
    """buildah with our own storage under the cache."""
    storage = images_root() / "buildah"
    return _run(
        [
            _buildah(),
            "--root",
            str(storage / "storage"),
            "--runroot",
            str(storage / "run"),
            "--storage-driver",
            "overlay",
            *args,
        ],
        log,
    )


def _stored_key(ref: str) -> str | None:
    """The cache key of the image buildah's storage holds under ``ref`` (its label), if any."""
    try:
        out = buildah("inspect", "--type", "image", ref)
    except ImageBuildFailed:
        return None
    labels = json.loads(out).get("OCIv1", {}).get("config", {}).get("Labels") or {}
    return labels.get(KEY_LABEL)


def _in_storage(entry: Entry) -> None:
    """The entry's image in buildah's storage under its ref (for the images built on it)."""
    if _stored_key(entry.image.ref) == entry.key:
        return
    image_id = buildah("pull", "--quiet", f"oci-archive:{entry.archive}").strip().splitlines()[-1]
    buildah("tag", image_id, entry.image.ref)


def _build_volumes() -> list[str]:
    """The host's CA bundle over the image's, for RUN steps only: a download then passes
    through this machine's TLS (uv is told to trust the system store by UV_NATIVE_TLS in the
    Dockerfiles; pip does so by itself). Only a file every base has: buildah 1.28 leaves an
    empty file in the layer at a mount target the image lacks."""
    return ["-v", f"{HOST_CA}:{HOST_CA}:ro"] if HOST_CA.exists() else []


# -- staging ---------------------------------------------------------------------------------


def _debian_rootfs(image: Image, context: Path, folder: Path, log: Path) -> None:
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise ImageBuildFailed("mmdebstrap is not installed (run `make setup`)")
    manifest = folder / "packages.txt"
    _run(
        [
            mmdebstrap,
            "--variant=minbase",
            "--include=" + ",".join(image.packages),
            *(f"--dpkgopt={option}" for option in DPKG_OPTIONS),
            *DEBIAN_HOOKS,
            "--customize-hook="
            f"chroot \"$1\" dpkg-query -W -f '${{Package}}\\t${{Version}}\\n' > {manifest}",
            DEBIAN_SUITE,
            str(context / "rootfs.tar"),
            *DEBIAN_MIRRORS,
        ],
        log,
    )


def _uv_wheel() -> Path:
    wheel = images_root() / "downloads" / UV_WHEEL
    if not wheel.exists():
        # PyPI's simple index, as JSON (PEP 691): every file of every release.
        index = urllib.request.Request(
            "https://pypi.org/simple/uv/",
            headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        )
        with urllib.request.urlopen(index, timeout=60) as answer:
            urls = {f["filename"]: f["url"] for f in json.load(answer)["files"]}
        wheel.parent.mkdir(parents=True, exist_ok=True)
        partial = wheel.with_name(wheel.name + ".partial")
        with (
            urllib.request.urlopen(urls[UV_WHEEL], timeout=300) as answer,
            partial.open("wb") as out,
        ):
            shutil.copyfileobj(answer, out)
        partial.rename(wheel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != UV_WHEEL_SHA256:
        wheel.unlink()
        raise ImageBuildFailed(f"{UV_WHEEL} has sha256 {digest}, not the pinned {UV_WHEEL_SHA256}")
    return wheel


def _unpack_uv(context: Path) -> None:
    with zipfile.ZipFile(_uv_wheel()) as wheel:
        for program in ("uv", "uvx"):
            target = context / program
            target.write_bytes(wheel.read(f"uv-{UV_VERSION}.data/scripts/{program}"))
            target.chmod(0o755)


def _pause(context: Path, log: Path) -> None:
    module = f"k8s.io/kubernetes@v{kube_build.KUBERNETES_VERSION}"
    source = kube_build.go_module_cache() / module / "build" / "pause" / "linux" / "pause.c"
    if not source.exists():
        _run(
            [_tool("go", GO_FALLBACK), "mod", "download", module],
            log,
            cwd=kube_build.GOMOD / "kubernetes",
            env=go_environment(),
        )
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ImageBuildFailed("gcc is not installed: the pause image is built from C")
    binary = context / "pause"
    version = f"-DVERSION=v{BY_NAME['pause'].ref.rsplit(':', 1)[1]}-samsa"
    _run([gcc, "-Os", "-Wall", "-Werror", "-static", version, "-o", str(binary), str(source)], log)
    _run(["strip", str(binary)], log)


def _go_program(name: str, context: Path) -> None:
    module = kube_build._module_of(name)
    try:
        folder, _ = kube_build.build_module(module)
    except ProgramUnavailable as exc:
        raise ImageBuildFailed(str(exc)) from exc
    shutil.copy2(folder / name, context / name)


def _stage(image: Image, context: Path, folder: Path, log: Path) -> None:
    """The image's build context in ``context``: its own files, or the repository's files
    its Dockerfile copies (the key covers exactly these), and what its stage step adds."""
    root = image.context()
    for f in _context_files(image):
        target = context / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    if image.stage == "debian":
        _debian_rootfs(image, context, folder, log)
    elif image.stage == "uv":
        _unpack_uv(context)
    elif image.stage == "zookeeper":
        try:
            shutil.copytree(jars.fetch(ZOOKEEPER_JARS), context / "lib")
        except jars.JarsUnavailable as exc:
            raise ImageBuildFailed(str(exc)) from exc
    elif image.stage == "pause":
        _pause(context, log)
    elif image.stage in ("coredns", "spark-operator"):
        _go_program(image.stage, context)


# -- building --------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_entry(entry: Entry, all_entries: dict[str, Entry]) -> bool:
    """The entry's image built and exported, unless it is in the cache; True if built now."""
    if entry.built:
        return False
    image = entry.image
    for base in image.bases.values():
        _in_storage(all_entries[base])
    folder = entry.folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    log = folder / "build.log"
    _say(f"{image.name}: building {image.ref} (key {entry.key[:16]}; log {log})")
    started = time.monotonic()
    work = images_root() / "tmp"
    work.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            context = Path(tmp)
            _stage(image, context, folder, log)
            args = {**image.args, **{a: all_entries[b].image.ref for a, b in image.bases.items()}}
            buildah(
                "bud",
                "--isolation",
                "chroot",
                "--pull=never",
                "--layers",
                *_build_volumes(),
                "--label",
                f"{KEY_LABEL}={entry.key}",
                *(flag for a, v in sorted(args.items()) for flag in ("--build-arg", f"{a}={v}")),
                "-f",
                str(context / image.containerfile),
                "-t",
                image.ref,
                str(context),
                log=log,
            )
        partial = folder / (ARCHIVE + ".partial")
        buildah("push", "--quiet", image.ref, f"oci-archive:{partial}:{image.ref}", log=log)
        partial.rename(entry.archive)
    finally:
        # Multi-stage builds leave working containers (and their mounts) behind.
        buildah("rm", "--all")
    seconds = round(time.monotonic() - started, 1)
    size = _size(image.ref)
    record = {
        "name": image.name,
        "ref": image.ref,
        "key": entry.key,
        "bases": {b: all_entries[b].key for b in image.bases.values()},
        "seconds": seconds,
        "size": size,
        "archive_bytes": entry.archive.stat().st_size,
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (folder / (ENTRY + ".partial")).write_text(json.dumps(record, indent=2) + "\n")
    os.replace(folder / (ENTRY + ".partial"), folder / ENTRY)
    _say(f"{image.name}: built in {seconds} s, {size}, archive {entry.archive}")
    # Earlier builds of this image go (hundreds of megabytes each); buildah keeps its layers.
    for old in images_root().iterdir():
        if old != folder and re.fullmatch(re.escape(image.name) + r"-[0-9a-f]{16}", old.name):
            shutil.rmtree(old, ignore_errors=True)
    return True


def _size(ref: str) -> str:
    """The image's size as buildah reports it (its layers, uncompressed)."""
    for row in json.loads(buildah("images", "--json", ref) or "[]"):
        return str(row.get("size", ""))
    return ""


def build(names: list[str] | None = None) -> list[tuple[Entry, bool]]:
    """The images asked for (all by default) and the images they build on, built unless
    cached; each with whether it was built now."""
    # One build at a time on this machine (a test and `make images` may both ask).
    with locked(images_root() / ".lock"):
        all_entries = entries(names)
        wanted = {image.name for image in named(names)}
        done = [(e, build_entry(e, all_entries)) for e in all_entries.values()]
    return [(e, built) for e, built in done if e.image.name in wanted or built]


def archives(names: list[str] | None = None) -> dict[str, Path]:
    """Ref -> OCI archive (for ``ctr -n k8s.io images import``) of each image asked for (by
    default every image a pod runs, not the bases), building what is missing."""
    wanted = [image.name for image in named(names, pods_only=True)]
    return {e.image.ref: e.archive for e, _ in build(wanted) if e.image.name in wanted}
