"""Which images `make images` builds, under which refs, from which Containerfile and on which
bases, with what pinned: data only. The refs are the ones pods name (the operator's defaults,
the chart's values, the spark-operator chart's controller image, kubeadm 1.34's pause and
CoreDNS), so that a node holding these images never pulls."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from samsa_dev.kube import build as kube_build

FILES = Path(__file__).resolve().parent / "files"
REPO = Path(__file__).resolve().parents[3]

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
# Documentation and translations left out of the bases (copyright files kept).
DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
)
# With the manuals left out, update-alternatives (openjdk's postinst) fails to link a manual
# page into a folder that is not there: the folder is made before the packages go in.
DEBIAN_HOOKS = ('--essential-hook=mkdir -p "$1/usr/share/man/man1"',)

UV_VERSION = "0.13.9"
UV_WHEEL = f"uv-{UV_VERSION}-py3-none-musllinux_1_1_x86_64.whl"
UV_WHEEL_SHA256 = "2c45530751517d6c3bbc69a19473f6effe47cce047bede01ffd8af7ea7b36b25"
PYSPARK_VERSION = "4.2.0"
PAUSE_VERSION = "3.10.1"
ZOOKEEPER_JARS = "zookeeper"  # the jar set (samsa_dev/maven/zookeeper.xml)


@dataclass(frozen=True)
class Image:
    """One image. ``containerfile`` is a repository Dockerfile (relative to the repository,
    built with the repository as context) or, when ``files`` is set, ``files/<files>/`` holds
    the Containerfile and its context, plus what ``stage`` puts there (see builder.py).
    ``bases`` maps a build argument to the image whose ref it gets."""

    name: str
    ref: str
    containerfile: str = "Containerfile"
    files: str | None = None
    stage: str | None = None
    bases: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    packages: tuple[str, ...] = ()  # a Debian base's packages
    pins: dict[str, str] = field(default_factory=dict)
    # False for a base that only other images build on: no pod names it.
    pods: bool = True

    @property
    def debian(self) -> bool:
        return bool(self.packages)

    def context(self) -> Path:
        return FILES / self.files if self.files else REPO

    def containerfile_path(self) -> Path:
        return self.context() / self.containerfile


_BASE_PACKAGES = ("python3", "ca-certificates", "tzdata")
_PY_BASES = {"BASE": "samsa-base", "UV_IMAGE": "uv"}


def _module_pin(name: str) -> dict[str, str]:
    """A Go program's pin: its wrapper module's key (version, go.sum, linker flags)."""
    return {name: kube_build._module_of(name).key()}


# In the order `make images` builds them: the most useful first, Spark (the heaviest) last.
IMAGES: tuple[Image, ...] = (
    Image(
        "samsa-base",
        "localhost/samsa-base:bookworm",
        files="debian",
        stage="debian",
        packages=_BASE_PACKAGES,
        pods=False,
    ),
    Image(
        "uv",
        f"localhost/uv:{UV_VERSION}",
        files="uv",
        stage="uv",
        pins={"uv": f"{UV_WHEEL} sha256:{UV_WHEEL_SHA256}"},
        pods=False,
    ),
    Image(
        "broker",
        "ghcr.io/samsa-dev/samsa:0.1.0",
        containerfile="broker_image/Dockerfile",
        bases=_PY_BASES,
    ),
    Image(
        "operator",
        "ghcr.io/samsa-dev/samsa-operator:0.1.0",
        containerfile="operator/Dockerfile",
        bases=_PY_BASES,
    ),
    Image(
        "samsa-jre",
        "localhost/samsa-jre:bookworm",
        files="debian",
        stage="debian",
        packages=(*_BASE_PACKAGES, "openjdk-17-jre-headless", "procps", "tini"),
        pods=False,
    ),
    Image(
        "zookeeper",
        "docker.io/library/zookeeper:3.9",
        files="zookeeper",
        stage="zookeeper",
        bases={"BASE": "samsa-jre"},
    ),
    Image(
        "pause",
        f"registry.k8s.io/pause:{PAUSE_VERSION}",
        files="pause",
        stage="pause",
        pins={
            "pause.c": f"k8s.io/kubernetes v{kube_build.KUBERNETES_VERSION}",
            "gcc": "-Os -static",
        },
    ),
    Image(
        "coredns",
        "registry.k8s.io/coredns/coredns:v1.12.1",
        files="coredns",
        stage="coredns",
        pins=_module_pin("coredns"),
    ),
    Image(
        "spark-base",
        f"localhost/spark:{PYSPARK_VERSION}-python3",
        files="spark-base",
        bases={"BASE": "samsa-jre", "UV_IMAGE": "uv"},
        args={"PYSPARK": PYSPARK_VERSION},
        pods=False,
    ),
    Image(
        "spark",
        "docker.io/library/samsa-spark:0.1.0",
        containerfile="spark-on-k8s/Dockerfile",
        bases={"SPARK_IMAGE": "spark-base"},
    ),
    Image(
        "spark-operator",
        "ghcr.io/kubeflow/spark-operator/controller:2.5.1",
        files="spark-operator",
        stage="spark-operator",
        bases={"BASE": "spark-base"},
        pins=_module_pin("spark-operator"),
    ),
)
BY_NAME = {image.name: image for image in IMAGES}


def named(names: list[str] | None, pods_only: bool = False) -> list[Image]:
    """The images asked for (when None, all, or with ``pods_only`` those pods run), in build
    order; an unknown name is an error."""
    if not names:
        return [image for image in IMAGES if image.pods or not pods_only]
    unknown = sorted(set(names) - set(BY_NAME))
    if unknown:
        raise KeyError(f"no image named {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return [image for image in IMAGES if image.name in names]
