"""A file region keeps its bytes reachable after its segment is closed or deleted."""

import os
from pathlib import Path

import pytest

from samsa.protocol.fileregion import FileRegion


def test_region_outlives_the_segment_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"0123456789" * 10)
    fd = os.open(path, os.O_RDONLY)
    region = FileRegion(fd, 10, 20)
    os.close(fd)
    path.unlink()
    assert len(region) == 20
    assert region.read() == b"0123456789" * 2
    region.close()
    assert region.fd == -1
    region.close()  # closing twice is harmless


def test_a_shrunken_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "seg.log"
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDWR)
    region = FileRegion(fd, 50, 50)
    os.ftruncate(fd, 60)
    os.close(fd)
    with pytest.raises(OSError, match="shrank"):
        region.read()
    region.close()
