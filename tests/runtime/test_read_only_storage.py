"""A system refuses to start on a read-only data directory or SQLite store
(``read_only_storage``), before any process starts and without changing a file."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import hayata_py as hy
from supervisors._system import STARTED_SESSIONS
from tests.chaos import disk

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not disk.ROOT, reason=disk.NOT_ROOT)]

# Another process writes the data dir first: this one's own log stream would
# hold a file open for writing, and Linux refuses remount,ro (EBUSY) then.
_PREPARE = """
import sys
import hayata_py as hy
hy.AgentSystem(sys.argv[1], store_url=sys.argv[2] or None).shutdown()
"""


def _remount(where: Path, mode: str) -> None:
    done = subprocess.run(["mount", "-o", f"remount,{mode}", str(where)],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs, remounted read-only by the test; read-write again and unmounted after."""
    with disk.tmpfs(tmp_path / "ro", "8m") as where:
        try:
            yield where
        finally:
            _remount(where, "rw")


def _contents(where: Path) -> dict[str, bytes]:
    return {str(p.relative_to(where)): p.read_bytes() for p in sorted(where.rglob("*"))
            if p.is_file()}


def _prepare(data: Path, store_url: str = "") -> None:
    subprocess.run([sys.executable, "-c", _PREPARE, str(data), store_url], check=True,
                   timeout=60, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("where", ["data_dir", "store"])
def test_start_on_a_read_only_filesystem_is_refused_at_once(
        where: str, read_only_dir: Path, tmp_path: Path) -> None:
    if where == "data_dir":  # the default store, in the data dir
        data, url, named = read_only_dir / "data", None, read_only_dir / "data"
    else:  # the data dir writable, the SQLite store on the read-only filesystem
        data, url, named = tmp_path / "data", f"sqlite:///{read_only_dir / 'h.db'}", read_only_dir
    _prepare(data, url or "")
    _remount(read_only_dir, "ro")
    before, sessions = _contents(read_only_dir), len(STARTED_SESSIONS)
    with pytest.raises(hy.ReadOnlyStorage) as caught:
        hy.AgentSystem(data, store_url=url)
    assert caught.value.code == "read_only_storage"
    assert str(named) in str(caught.value) and "remount,rw" in str(caught.value)
    assert caught.value.details["path"].startswith(str(read_only_dir))
    assert len(STARTED_SESSIONS) == sessions  # no actor system, so no process, started
    assert _contents(read_only_dir) == before
    _remount(read_only_dir, "rw")
    with hy.AgentSystem(data, store_url=url) as system:  # writable again: it starts
        assert system.store_url.endswith(".db")


def test_a_data_dir_to_create_on_a_read_only_filesystem_is_refused(
        read_only_dir: Path) -> None:
    _remount(read_only_dir, "ro")
    with pytest.raises(hy.ReadOnlyStorage, match="data directory") as caught:
        hy.AgentSystem(read_only_dir / "new" / "data")
    assert caught.value.details["path"] == str(read_only_dir)
    assert not (read_only_dir / "new").exists()
