"""Node.js and npm for the tests that drive ``hayata serve`` with LangGraph's JS
clients (tests/serve/test_js_sdk.py, and ``make test-ui``'s tests/ui): find
them, or get them, and install a folder's locked npm packages once.

``make test`` runs ``python -m tests.node`` (``make node``) before the suite,
which, in this order:

1. uses ``node`` and ``npm`` found on ``PATH``;
2. as root on a machine with ``apt-get``, installs Debian's ``nodejs`` and
   ``npm`` (after ``apt-get update``) and uses them;
3. otherwise stops, before the suite, with the one line :data:`MISSING`.

The tests ask :func:`find` (installing nothing) and fail with the same line:
they never skip. :func:`npm_ci` installs a folder's ``package-lock.json``
with ``npm ci`` unless its ``node_modules`` already holds exactly that lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

APT_PACKAGES = ("nodejs", "npm")
APT_TIMEOUT = 900.0  # seconds for `apt-get update` and for `apt-get install`
NPM_CI_TIMEOUT = 500.0  # seconds for one `npm ci` (under the JS test's 600 s timeout)
MISSING = ("the JS client tests (tests/serve/test_js_sdk.py, make test-ui) need Node.js 18 or "
           "newer and npm, and none was found or installed: install them (Debian/Ubuntu, as "
           "root: apt-get update && apt-get install -y nodejs npm), or put node and npm on PATH")
#: Written into ``node_modules`` after a successful ``npm ci``: the lock's hash.
STAMP = ".hayata-lock-sha256"
#: Held (``flock``) while a folder is installed: two test runs at once take turns.
LOCK = ".npm-ci.lock"


@dataclass(frozen=True)
class Node:
    """The ``node`` and ``npm`` programs the tests run."""

    node: str
    npm: str


def find() -> Node | None:
    """``node`` and ``npm`` on ``PATH``, or None; installs nothing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    return Node(node, npm) if node and npm else None


def apt_install() -> bool:
    """As root with ``apt-get``: install :data:`APT_PACKAGES`; True if it succeeded."""
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        return False
    print(f"installing {' and '.join(APT_PACKAGES)} with apt-get for the JS client tests",
          file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for args in (["update", "-qq"], ["install", "-y", "-qq", *APT_PACKAGES]):
            subprocess.run([apt, *args], env=env, check=True, timeout=APT_TIMEOUT,
                           stdout=subprocess.DEVNULL)
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"apt-get failed: {exc}", file=sys.stderr)
        return False
    return True


def ensure() -> Node | None:
    """``node`` and ``npm``, getting them where this machine allows (see the module)."""
    return find() or (find() if apt_install() else None)


def lock_hash(folder: Path) -> str:
    """The SHA-256 of ``folder/package-lock.json``."""
    return hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()


def installed(folder: Path) -> bool:
    """Whether ``folder/node_modules`` holds exactly the packages of its lock."""
    stamp = folder / "node_modules" / STAMP
    return stamp.is_file() and stamp.read_text().strip() == lock_hash(folder)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if missing), waited for."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def npm_ci(folder: Path, node: Node) -> float | None:
    """``npm ci`` in ``folder`` unless :func:`installed`; the seconds it took, or
    None if nothing was installed. Raises ``RuntimeError`` with npm's output
    if it fails. Runs at once in one folder take turns (:data:`LOCK`)."""
    with locked(folder / LOCK):
        return _npm_ci(folder, node)


def _npm_ci(folder: Path, node: Node) -> float | None:
    if installed(folder):
        return None
    started = time.monotonic()
    done = subprocess.run([node.npm, "ci", "--no-audit", "--no-fund"], cwd=folder,
                          capture_output=True, text=True, timeout=NPM_CI_TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"npm ci in {folder} exited {done.returncode}:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    (folder / "node_modules" / STAMP).write_text(lock_hash(folder) + "\n")
    return time.monotonic() - started


def main() -> int:
    node = ensure()
    if node is None:
        print(f"error: {MISSING}", file=sys.stderr)
        return 1
    print(f"JS client tests: {node.node} with {node.npm}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
