"""`make images`: the images pods run here, built by a real image builder (buildah) from the
repository's Dockerfiles and from Containerfiles of our own (``files/``), on bases made from
Debian's packages, with a cache keyed on each image's inputs so that a second run builds
nothing.

- catalogue.py: which images, their refs, Containerfiles, bases and pins (data);
- keys.py: what a Containerfile reads from its context, and the cache key (pure);
- builder.py: staging, buildah, the cache entries and their OCI archives (I/O).

``archives(names=None)`` is what the real nodes load into their containerd: ref -> archive.
"""

from samsa_dev.images.builder import ImageBuildFailed, archives, build, entries
from samsa_dev.images.catalogue import IMAGES

__all__ = ["IMAGES", "ImageBuildFailed", "archives", "build", "entries"]
