"""The headless browser of the observer's browser test: find it, or get it.

``make test`` runs ``python -m tests.browser`` (``make browser``) before the
suite, which, in this order:

1. uses Chromium (or Chrome) and ``chromedriver`` found on ``PATH``;
2. as root on a machine with ``apt-get``, installs Debian's ``chromium`` and
   ``chromium-driver`` (after ``apt-get update``) and uses them;
3. lets Selenium Manager (shipped with selenium) fetch Chrome for Testing and
   its driver into ``~/.cache/selenium``, where it can reach the network;
4. otherwise stops, before the suite, with the one line :data:`MISSING`.

The test itself (``tests.observer_util.chrome``) asks :func:`find` (steps 1
and 3, installing nothing) and fails with the same line: it never skips.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
DRIVER = "chromedriver"
APT_PACKAGES = ("chromium", "chromium-driver")
APT_TIMEOUT = 900.0  # seconds for `apt-get update` and for `apt-get install`
MISSING = ("the observer's browser test (tests/cli/test_observer_browser.py) needs Chromium and "
           "chromedriver, and none was found, installed or downloaded: install them "
           "(Debian/Ubuntu, as root: apt-get update && apt-get install -y chromium "
           "chromium-driver), or let Selenium Manager download Chrome for Testing (it needs "
           "HTTPS access to googlechromelabs.github.io and storage.googleapis.com)")


@dataclass(frozen=True)
class Browser:
    """A browser binary and the chromedriver that drives it."""

    browser: str
    driver: str
    source: str
    """Where they came from: ``PATH`` or ``Selenium Manager``."""


def on_path() -> Browser | None:
    """Chromium (or Chrome) and chromedriver on ``PATH``, or None."""
    driver = shutil.which(DRIVER)
    browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    return Browser(browser, driver, "PATH") if browser and driver else None


def from_selenium_manager() -> Browser | None:
    """What Selenium Manager finds or downloads (None if it cannot: offline, say)."""
    try:
        from selenium.webdriver.common.selenium_manager import SeleniumManager

        paths = SeleniumManager().binary_paths(["--browser", "chrome"])
    except Exception:  # noqa: BLE001 - any failure means "not from here"
        return None
    browser, driver = paths.get("browser_path"), paths.get("driver_path")
    if browser and driver and Path(browser).is_file() and Path(driver).is_file():
        return Browser(str(browser), str(driver), "Selenium Manager")
    return None


def find() -> Browser | None:
    """The browser to drive, installing nothing: ``PATH``, then Selenium Manager."""
    return on_path() or from_selenium_manager()


def apt_install() -> bool:
    """As root with ``apt-get``: install :data:`APT_PACKAGES`; True if it succeeded."""
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        return False
    print(f"installing {' and '.join(APT_PACKAGES)} with apt-get for the observer's "
          f"browser test", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for args in (["update", "-qq"], ["install", "-y", "-qq", *APT_PACKAGES]):
            subprocess.run([apt, *args], env=env, check=True, timeout=APT_TIMEOUT,
                           stdout=subprocess.DEVNULL)
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"apt-get failed: {exc}", file=sys.stderr)
        return False
    return True


def ensure() -> Browser | None:
    """The browser to drive, getting one where this machine allows (see the module)."""
    return on_path() or (on_path() if apt_install() else None) or from_selenium_manager()


def main() -> int:
    # Selenium Manager's warnings would print on stderr through logging's last
    # resort: the outcome is the one line below.
    logging.getLogger("selenium").setLevel(logging.CRITICAL)
    browser = ensure()
    if browser is None:
        print(f"error: {MISSING}", file=sys.stderr)
        return 1
    print(f"observer browser test: {browser.browser} with {browser.driver} "
          f"(from {browser.source})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
