"""``make browser`` (``python -m tests.browser``): finds, installs or names the
browser of the observer's test, with PATH faked so nothing real is installed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import MISSING

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def bin_dir(tmp_path: Path) -> Path:
    """An empty directory to be the whole PATH."""
    path = tmp_path / "bin"
    path.mkdir()
    return path


def check(on_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the check with only ``on_path`` on PATH, and a Selenium Manager that
    fails as offline (with a warning of its own), so nothing is downloaded."""
    manager = script(on_path.parent / "selenium-manager", """echo '{"logs": \
[{"level": "WARN", "timestamp": 0, "message": "offline"}], "result": {"code": 65, \
"message": "error sending request", "driver_path": "", "browser_path": ""}}'
exit 65""")
    env = {**os.environ, "PATH": str(on_path), "SE_MANAGER_PATH": str(manager)}
    return subprocess.run([sys.executable, "-m", "tests.browser"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=30, check=False)


def test_without_a_browser_it_stops_with_one_line_naming_what_to_install(
        tmp_path: Path) -> None:
    done = check(bin_dir(tmp_path))  # no chromium, no chromedriver, no apt-get
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [f"error: {MISSING}"]
    assert "apt-get install -y chromium chromium-driver" in MISSING


def test_a_browser_on_path_is_used_and_nothing_is_installed(tmp_path: Path) -> None:
    bin_ = bin_dir(tmp_path)
    script(bin_ / "apt-get", f"echo called >> {tmp_path / 'apt.log'}")
    for name in ("chromium", "chromedriver"):
        script(bin_ / name, "exit 0")
    done = check(bin_)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"observer browser test: {bin_ / 'chromium'} with "
                                   f"{bin_ / 'chromedriver'} (from PATH)")
    assert not (tmp_path / "apt.log").exists()


def test_apt_get_installs_chromium_as_root_and_only_as_root(tmp_path: Path) -> None:
    # A fake apt-get: records its arguments; "install" puts the two programs on PATH.
    log, bin_ = tmp_path / "apt.log", bin_dir(tmp_path)
    script(bin_ / "apt-get", f"""echo "$@" >> {log}
case "$1" in install)
  printf '#!/bin/sh\\n' > {bin_}/chromium; printf '#!/bin/sh\\n' > {bin_}/chromedriver
  /bin/chmod +x {bin_}/chromium {bin_}/chromedriver;;
esac""")
    done = check(bin_)
    if os.geteuid() == 0:
        assert done.returncode == 0, done.stderr
        assert log.read_text().splitlines() == [
            "update -qq", "install -y -qq chromium chromium-driver"]
        assert "(from PATH)" in done.stdout
        assert done.stderr.splitlines() == [
            "installing chromium and chromium-driver with apt-get for the observer's "
            "browser test"]
    else:  # not root: apt-get is not tried; the one line says what to install
        assert not log.exists()
        assert done.returncode == 1 and done.stderr.splitlines() == [f"error: {MISSING}"]
