"""The images the real nodes hold before any pod runs, as image archives for
``ctr -n k8s.io images import`` (`archives`): those `make images` builds (`samsa_dev.images`)
that pods on the nodes run. Where that module is not there, a stand-in: the pause image,
built here from the C source that k8s.io/kubernetes ships (``build/pause/linux/pause.c``, in
the module `make k8s` downloaded) into a one-file image written as a docker-archive with no
image builder, and whatever archives are put in ``<cache>/node-images/archives/``.

A docker-archive is a tar of ``manifest.json``, the image's config and one tar per layer; the
config's ``diff_ids`` are the layers' sha256. ``ctr import`` keeps its ``RepoTags``."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

from samsa_dev.cache import cache_root
from samsa_dev.kube import build
from samsa_dev.kube.nodeconfig import PAUSE_IMAGE
from samsa_dev.programs import ProgramUnavailable, go_module_cache

PAUSE_VERSION = "3.10.1"
# samsa_dev.images' names of the images pods on the nodes run (Spark's come with its tests).
NODE_IMAGES = ["pause", "coredns", "broker", "operator", "zookeeper"]


def _folder() -> Path:
    return cache_root() / "node-images"


def _add(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    archive.addfile(info, io.BytesIO(data))


def docker_archive(
    out: Path,
    ref: str,
    files: dict[str, tuple[bytes, int]],
    *,
    entrypoint: list[str],
    user: str,
) -> Path:
    """A one-layer image FROM scratch: `files` (path in the image: content, mode)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, (data, mode) in sorted(files.items()):
            _add(tar, name.lstrip("/"), data, mode)
    layer_bytes = layer.getvalue()
    diff_id = hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": user, "Env": ["PATH=/"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created_by": "samsa_dev.kube.node_images"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [f"{diff_id}/layer.tar"]}]
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, mode="w") as tar:
        _add(tar, config_name, config_bytes)
        _add(tar, f"{diff_id}/layer.tar", layer_bytes)
        _add(tar, "manifest.json", json.dumps(manifest).encode())
    partial.rename(out)
    return out


def pause_archive() -> Path:
    """``registry.k8s.io/pause:3.10.1``, built once (static, stripped, as Kubernetes builds
    it) into ``<cache>/node-images/pause-<hash>/``, keyed by the source."""
    module = f"k8s.io/kubernetes@v{build.KUBERNETES_VERSION}"
    source = go_module_cache() / module / "build" / "pause" / "linux" / "pause.c"
    if not source.exists():
        raise ProgramUnavailable(f"no {source}: run `make k8s` (it downloads {module})")
    key = hashlib.sha256(source.read_bytes() + PAUSE_VERSION.encode()).hexdigest()[:12]
    folder = _folder() / f"pause-{key}"
    archive = folder / "image.tar"
    if archive.exists():
        return archive
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ProgramUnavailable("no gcc: the pause image is built from C (apt install gcc)")
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / "pause"
    result = subprocess.run(
        [
            gcc,
            "-Os",
            "-Wall",
            "-Werror",
            "-static",
            f"-DVERSION=v{PAUSE_VERSION}-samsa",
            "-o",
            str(binary),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ProgramUnavailable(f"the pause image's build failed: {result.stderr[-500:]}")
    subprocess.run(["strip", str(binary)], check=True)
    return docker_archive(
        archive,
        PAUSE_IMAGE,
        {"/pause": (binary.read_bytes(), 0o755)},
        entrypoint=["/pause"],
        user="65535:65535",
    )


def refs(archive: Path) -> list[str]:
    """The image names an archive carries: a docker-archive's RepoTags, an OCI archive's
    ref.name annotations."""
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        if "manifest.json" in names:
            member = tar.extractfile("manifest.json")
            assert member is not None
            return [tag for image in json.load(member) for tag in image.get("RepoTags") or []]
        member = tar.extractfile("index.json")
        assert member is not None
        return [
            m["annotations"]["org.opencontainers.image.ref.name"]
            for m in json.load(member).get("manifests", [])
            if "org.opencontainers.image.ref.name" in (m.get("annotations") or {})
        ]


def archives() -> dict[str, Path]:
    """Ref -> image archive of every image the nodes hold: `samsa_dev.images`' (built if
    missing); without that module, the pause image and the archives found in
    ``<cache>/node-images/archives/``, by the refs they carry."""
    try:
        images = importlib.import_module("samsa_dev.images")
    except ImportError:
        found = {PAUSE_IMAGE: pause_archive()}
        for path in sorted((_folder() / "archives").glob("*.tar")):
            found.update(dict.fromkeys(refs(path), path))
        return found
    return dict(images.archives(NODE_IMAGES))
