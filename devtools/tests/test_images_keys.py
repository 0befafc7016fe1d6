"""The images' cache keys: what a Containerfile reads from its context, and which changes move
a key (pure logic; the builds themselves are tested in tests/e2e/test_images.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa_dev.images import catalogue, keys

DOCKERFILE = """\
ARG BASE=python:3.11-slim
ARG MAVEN=https://repo1.maven.org/maven2
FROM ${UV_IMAGE} AS uv
FROM ${BASE} AS build
COPY --from=uv /uv /usr/local/bin/uv
# COPY commented.txt out/
COPY pyproject.toml uv.lock ./
COPY --chown=1000:1000 app \\
     /src/app
ADD --chmod=644 ${MAVEN}/org/x/x-1.jar /opt/jars/
ADD ["data dir/file.txt", "/data/"]
COPY ./conf/*.cfg /etc/app/
"""


def test_copied_sources_are_the_context_paths_copy_and_add_read():
    assert keys.copied_sources(DOCKERFILE) == [
        "pyproject.toml",
        "uv.lock",
        "app",
        "data dir/file.txt",
        "conf/*.cfg",
    ]


def _context(root: Path) -> None:
    for name, text in {
        "pyproject.toml": "[project]\n",
        "uv.lock": "lock\n",
        "app/main.py": "print(1)\n",
        "app/__pycache__/main.cpython-311.pyc": "bytecode",
        "data dir/file.txt": "data\n",
        "conf/a.cfg": "a\n",
        "conf/b.txt": "not copied\n",
        "unrelated.md": "not copied\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_context_files_expand_folders_and_globs_without_bytecode(tmp_path):
    _context(tmp_path)
    files = keys.context_files(tmp_path, keys.copied_sources(DOCKERFILE))
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "app/main.py",
        "conf/a.cfg",
        "data dir/file.txt",
        "pyproject.toml",
        "uv.lock",
    ]


def test_a_source_missing_from_the_context_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"uv\.lock"):
        keys.context_files(tmp_path, ["uv.lock"])


def _key(root: Path, **change: object) -> str:
    files = keys.context_files(root, keys.copied_sources(DOCKERFILE))
    inputs: dict[str, object] = {
        "ref": "ghcr.io/samsa-dev/samsa:0.1.0",
        "containerfile": DOCKERFILE.encode(),
        "context": keys.context_digest(root, files),
        "args": {"BASE": "localhost/samsa-base:bookworm"},
        "bases": {"BASE": "b" * 64},
        "pins": {"uv": "0.13.9"},
        "builder": "buildah version 1.28.2",
    }
    inputs.update(change)
    return keys.image_key(**inputs)  # type: ignore[arg-type]


def test_the_key_moves_with_each_input_and_only_with_them(tmp_path):
    _context(tmp_path)
    key = _key(tmp_path)
    assert _key(tmp_path) == key
    # Not copied, or never in a context: the key stays.
    (tmp_path / "unrelated.md").write_text("changed\n")
    (tmp_path / "conf/b.txt").write_text("changed\n")
    (tmp_path / "app/__pycache__/main.cpython-311.pyc").write_text("other bytecode")
    assert _key(tmp_path) == key
    moved = {
        _key(tmp_path, ref="ghcr.io/samsa-dev/samsa:0.2.0"),
        _key(tmp_path, containerfile=DOCKERFILE.encode() + b"USER 1000\n"),
        _key(tmp_path, args={"BASE": "python:3.11-slim"}),
        _key(tmp_path, bases={"BASE": "c" * 64}),
        _key(tmp_path, pins={"uv": "0.13.10"}),
        _key(tmp_path, builder="buildah version 1.39.0"),
    }
    assert len(moved) == 6 and key not in moved
    (tmp_path / "app/main.py").write_text("print(2)\n")
    assert _key(tmp_path) != key
    (tmp_path / "app/main.py").write_text("print(1)\n")
    (tmp_path / "app/new.py").write_text("")
    assert _key(tmp_path) != key


def test_the_catalogue_builds_every_base_before_its_images_with_the_refs_pods_name():
    order = [image.name for image in catalogue.IMAGES]
    for image in catalogue.IMAGES:
        for base in image.bases.values():
            assert order.index(base) < order.index(image.name), (base, image.name)
    refs = {image.ref for image in catalogue.IMAGES}
    from samsa_operator import models, resources

    assert resources.DEFAULT_BROKER_IMAGE in refs
    assert f"docker.io/library/{models.ZooKeeper().image}" in refs
    assert "ghcr.io/samsa-dev/samsa-operator:0.1.0" in refs
    # Every ref is fully qualified: an OCI archive keeps it as given.
    assert all(
        ref.split("/", 1)[0] in ("localhost", "docker.io", "ghcr.io", "registry.k8s.io")
        for ref in refs
    )


def test_the_repository_dockerfiles_take_their_base_as_a_build_argument():
    for name in ("broker", "operator"):
        image = catalogue.BY_NAME[name]
        text = image.containerfile_path().read_text()
        # The defaults keep a docker build elsewhere as it was.
        assert "ARG BASE=python:3.11-slim\n" in text
        assert "ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13\n" in text
        assert set(image.bases) == {"BASE", "UV_IMAGE"}
    # buildah 1.28 refuses ADD --checksum: the Spark image checks its downloads with sha256sum.
    spark = catalogue.BY_NAME["spark"].containerfile_path().read_text()
    assert "ARG SPARK_IMAGE=" in spark
    assert not [rest for _, rest in keys.instructions(spark) if "--checksum" in rest]
