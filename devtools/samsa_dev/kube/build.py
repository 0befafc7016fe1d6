"""`make k8s`: etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from the
Go module proxy, pinned, into ``<cache>/k8s/<module>-<version>-<hash>/``; the kubelet and
kube-proxy of the real nodes (kube/realnodes.py), from a wrapper of their own
(``gomod/kubernetes-node``) so that the control plane's key does not move with them; and the
Kubeflow spark-operator, whose SparkApplications the Spark tests submit (its Helm chart comes in the
same module, and is installed from the module cache).

k8s.io/kubernetes replaces its staging modules (k8s.io/api, k8s.io/apiserver, ...) with
``./staging`` paths that its module zip leaves out, so it cannot be built as a dependency by
itself. The wrapper module in ``gomod/kubernetes`` requires it and replaces each staging
module with the published k8s.io/* module of the same release (v0.34.x for 1.34.x);
``gomod/etcd`` requires etcd's server module. Their go.mod and go.sum are committed; the
cache key is their hash, so a second run builds nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from samsa_dev.cache import cache_root, locked
from samsa_dev.programs import (
    GO_FALLBACK,
    ProgramUnavailable,
    _digest,
    _tool,
    go_environment,
    go_module_cache,
)

GOMOD = Path(__file__).resolve().parent.parent / "gomod"


@dataclass(frozen=True)
class GoModule:
    """A wrapper module and the programs it builds (binary name: Go package)."""

    name: str
    version: str
    programs: dict[str, str]
    # Linker flags: the version a program reports (helm checks the chart's kubeVersion).
    ldflags: str = ""

    @property
    def folder(self) -> Path:
        return GOMOD / self.name

    def key(self) -> str:
        files = [self.folder / "go.mod", self.folder / "go.sum"]
        digest = _digest(files, self.folder)
        digest = hashlib.sha256((digest + self.ldflags).encode()).hexdigest()
        return f"{self.name}-{self.version}-{digest[:12]}"

    def directory(self) -> Path:
        return cache_root() / "k8s" / self.key()


def _version_flags(version: str) -> str:
    """What Kubernetes' own build stamps into its version packages (unstamped, a build says
    v0.0.0-master)."""
    major, minor, _ = version.split(".")
    values = {
        "gitVersion": f"v{version}",
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
    }
    return " ".join(
        f"-X {package}.{name}={value}"
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for name, value in values.items()
    )


SPARK_OPERATOR = "github.com/kubeflow/spark-operator/v2"

MODULES = (
    GoModule("etcd", "3.6.16", {"etcd": "go.etcd.io/etcd/server/v3"}),
    GoModule(
        "kubernetes",
        "1.34.4",
        {
            name: f"k8s.io/kubernetes/cmd/{name}"
            for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
        },
        _version_flags("1.34.4"),
    ),
    # The node programs: the same release and replaces, in a wrapper apart from the control
    # plane's so that adding them did not change its cache key.
    GoModule(
        "kubernetes-node",
        "1.34.4",
        {name: f"k8s.io/kubernetes/cmd/{name}" for name in ("kubelet", "kube-proxy")},
        _version_flags("1.34.4"),
    ),
    # The proxy refuses this module's version list, so `go install ...@latest` cannot work;
    # the exact version is served.
    GoModule(
        "spark-operator",
        "2.5.1",
        {"spark-operator": f"{SPARK_OPERATOR}/cmd/operator"},
        _version_flags("2.5.1"),
    ),
    # The real nodes' cluster DNS (kubeadm 1.34's CoreDNS) for its image (`make images`),
    # without symbols: the image is the binary.
    GoModule("coredns", "1.12.1", {"coredns": "github.com/coredns/coredns"}, "-s -w"),
)
KUBERNETES_VERSION = MODULES[1].version


def spark_operator_chart() -> Path:
    """The spark-operator's Helm chart, from the module `make k8s` downloaded to build it (and
    downloads again if Go's module cache was emptied since)."""
    module = _module_of("spark-operator")
    source = f"{SPARK_OPERATOR}@v{module.version}"
    chart = go_module_cache() / source / "charts" / "spark-operator-chart"
    if not (chart / "Chart.yaml").exists():
        subprocess.run(
            [_tool("go", GO_FALLBACK), "mod", "download", source],
            cwd=module.folder,
            env=go_environment(),
            capture_output=True,
            check=False,
        )
    if not (chart / "Chart.yaml").exists():
        raise ProgramUnavailable(f"the spark-operator chart is not at {chart}: run `make k8s`")
    return chart


def _module_of(program: str) -> GoModule:
    for module in MODULES:
        if program in module.programs:
            return module
    raise KeyError(program)


def binary(program: str) -> Path:
    """A built control-plane program, or ProgramUnavailable naming ``make k8s``."""
    path = _module_of(program).directory() / program
    if not path.exists():
        raise ProgramUnavailable(f"{program} is not built (expected {path}): run `make k8s`")
    return path


def build_module(module: GoModule) -> tuple[Path, bool]:
    """The module's programs built into their cache folder; False if they were there."""
    target = module.directory()
    if all((target / p).exists() for p in module.programs):
        return target, False
    with locked(target.parent / f"{module.name}.lock"):
        if all((target / p).exists() for p in module.programs):  # built while we waited
            return target, False
        return _build_module(module, target), True


def _build_module(module: GoModule, target: Path) -> Path:
    go = _tool("go", GO_FALLBACK)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = go_environment()
    env["GOFLAGS"] += " -trimpath"
    result = subprocess.run(
        [
            go,
            "build",
            "-p",
            str(min(os.cpu_count() or 2, 4)),
            "-ldflags",
            module.ldflags,
            "-o",
            # One package: the binary's name is given (etcd's package ends in /v3).
            str(partial / next(iter(module.programs)))
            if len(module.programs) == 1
            else f"{partial}/",
            *module.programs.values(),
        ],
        cwd=module.folder,
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        tail = " | ".join(result.stderr.strip().splitlines()[-5:])
        raise ProgramUnavailable(f"go build of {module.name} {module.version} failed: {tail}")
    # Several packages: `go build -o dir/` names each binary after its package's last element.
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    # Older builds of this module only: "kubernetes-*" would also match "kubernetes-node-*".
    for old in target.parent.glob(f"{module.name}-[0-9]*"):
        if old != target and not old.name.endswith(".partial"):
            shutil.rmtree(old, ignore_errors=True)
    return target


def build() -> list[tuple[GoModule, Path, bool]]:
    return [(m, *build_module(m)) for m in MODULES]
