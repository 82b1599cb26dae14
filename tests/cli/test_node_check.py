"""``make node`` (``python -m tests.node``): finds, installs or names Node.js
and npm for the JS client tests, with PATH faked so nothing real is installed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.node import MISSING

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def check(on_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the check with only ``on_path`` on PATH."""
    env = {**os.environ, "PATH": str(on_path)}
    return subprocess.run([sys.executable, "-m", "tests.node"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=30, check=False)


def test_without_node_it_stops_with_one_line_naming_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    done = check(tmp_path / "bin")  # no node, no npm, no apt-get
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [f"error: {MISSING}"]
    assert "apt-get install -y nodejs npm" in MISSING


def test_node_on_path_is_used_and_nothing_is_installed(tmp_path: Path) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    script(bin_ / "apt-get", f"echo called >> {tmp_path / 'apt.log'}")
    for name in ("node", "npm"):
        script(bin_ / name, "exit 0")
    done = check(bin_)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"JS client tests: {bin_ / 'node'} with {bin_ / 'npm'}"
    assert not (tmp_path / "apt.log").exists()


def test_apt_get_installs_node_as_root_and_only_as_root(tmp_path: Path) -> None:
    # A fake apt-get: records its arguments; "install" puts node and npm on PATH.
    log, bin_ = tmp_path / "apt.log", tmp_path / "bin"
    bin_.mkdir()
    script(bin_ / "apt-get", f"""echo "$@" >> {log}
case "$1" in install)
  printf '#!/bin/sh\\n' > {bin_}/node; printf '#!/bin/sh\\n' > {bin_}/npm
  /bin/chmod +x {bin_}/node {bin_}/npm;;
esac""")
    done = check(bin_)
    if os.geteuid() == 0:
        assert done.returncode == 0, done.stderr
        assert log.read_text().splitlines() == ["update -qq", "install -y -qq nodejs npm"]
        assert done.stderr.splitlines() == [
            "installing nodejs and npm with apt-get for the JS client tests"]
    else:  # not root: apt-get is not tried; the one line says what to install
        assert not log.exists()
        assert done.returncode == 1 and done.stderr.splitlines() == [f"error: {MISSING}"]
