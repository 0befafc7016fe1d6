"""The images the real nodes hold before any pod runs (`archives`): those of `make images`
(`samsa_dev.images`) that pods on the nodes run, as archives for
``ctr -n k8s.io images import``. Spark's images are loaded by its own tests."""

from __future__ import annotations

from pathlib import Path

from samsa_dev import images

# samsa_dev.images' names of the images pods on the nodes run.
NODE_IMAGES = ["pause", "coredns", "broker", "operator", "zookeeper"]


def archives() -> dict[str, Path]:
    """Ref -> image archive of every image the nodes hold, built first if missing."""
    return dict(images.archives(NODE_IMAGES))
