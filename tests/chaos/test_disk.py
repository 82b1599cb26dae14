"""The SQLite store's own tmpfs and the disk-full fault's filler."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos import disk

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(not disk.ROOT, reason=disk.NOT_ROOT)]


def test_the_tmpfs_is_unmounted_even_when_the_body_fails(tmp_path: Path) -> None:
    where = tmp_path / "db"
    with pytest.raises(RuntimeError), disk.tmpfs(where, "1m"):
        assert os.path.ismount(where)
        (where / "x").write_text("x")
        raise RuntimeError("the campaign failed")
    assert not os.path.ismount(where)
    assert not (where / "x").exists()


def test_a_refused_mount_fails_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(disk.MountRefused, match="need a tmpfs of their own"), \
            disk.tmpfs(tmp_path / "db", "not-a-size"):
        pytest.fail("mounted with an invalid size")
    assert not os.path.ismount(tmp_path / "db")


def test_the_filler_leaves_no_free_block_until_removed(tmp_path: Path) -> None:
    with disk.tmpfs(tmp_path / "db", "1m") as where:
        (where / "db").write_bytes(b"x" * 10_000)
        disk.fill(where / disk.FILLER)
        assert os.statvfs(where).f_bavail == 0
        with pytest.raises(OSError, match="No space left"):
            (where / "more").write_bytes(b"y" * 8192)
        (where / disk.FILLER).unlink()
        (where / "more").write_bytes(b"y" * 8192)
        assert os.statvfs(where).f_bavail > 0
