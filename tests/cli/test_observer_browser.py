"""The observer page in a real headless browser (Debian's chromium, via Selenium),
against a system and an observer started with the ``hayata`` command, as a user would.

Never skipped: without a browser it fails saying what to install (``make test``
gets one first: ``make browser``, tests/browser.py).

With ``HAYATA_WRITE_SCREENSHOT=1`` it also writes the README's screenshots of
the page it tested, ``docs/observer.png`` and ``docs/observer-resolve.png``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from tests.cli.test_cli import ROOT, hayata, ok, popen, record
from tests.helpers import alive, eventually
from tests.observer_util import chrome, click, uncertain_slow

pytestmark = pytest.mark.timeout(180)

NODE = "agent:hello/nodes/node:echo"
AGENT = "agent:hello/agent"
SCREENSHOT_ENV = "HAYATA_WRITE_SCREENSHOT"
SCREENSHOTS = ROOT / "docs"


def tree_pids(tree: dict[str, Any]) -> dict[str, int]:
    """``path -> pid`` of every row of ``tree()`` that has a process."""
    found: dict[str, int] = {}

    def visit(row: dict[str, Any], path: list[str]) -> None:
        if row.get("pid") and path:
            found["/".join(path)] = row["pid"]
        for child in row.get("children", []):
            visit(child, [*path, child["id"]])

    visit(tree, [])
    return found


def text(driver: Any, selector: str) -> str:
    """The text of the element ``selector`` names ("" if none), read in one step
    of the page's script (the page re-renders on live updates)."""
    found: str = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
        selector)
    return found


def screenshot(driver: Any, name: str) -> None:
    """With ``HAYATA_WRITE_SCREENSHOT=1``: the page as ``docs/<name>``, once no
    row still flashes (a replaced pid's highlight fades in 1.2 s)."""
    if os.environ.get(SCREENSHOT_ENV) != "1":
        return
    eventually(lambda: driver.execute_script(
        "return document.getAnimations().every(a => a.playState !== 'running');"),
        message="the page's animations ended")
    driver.save_screenshot(str(SCREENSHOTS / name))


def page_pids(driver: Any) -> dict[str, int]:
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#tree .node-line')]"
        ".map(l => [l.dataset.path, l.dataset.pid]);")
    return {path: int(pid) for path, pid in rows if path and pid}


@pytest.fixture
def observed(tmp_path: Path) -> Iterator[tuple[Path, hy.AgentSystem, str]]:
    """A system started by ``hayata system start`` with agent hello, a handle on it,
    and the URL printed by ``hayata observe --port 0``."""
    data_dir = tmp_path / "data"
    proc: subprocess.Popen[str] | None = None
    system: hy.AgentSystem | None = None
    try:
        ok(data_dir, "system", "start")
        ok(data_dir, "agent", "start", "tests.cli_fixtures:config")
        proc = popen(data_dir, "observe", "--port", "0")
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        url = lines[1].strip()
        assert lines[0].startswith("hayata observer for ") and url.startswith(
            "http://127.0.0.1:") and "/?token=" in url, lines
        system = hy.AgentSystem.connect(record(data_dir)["admin_port"])
        yield data_dir, system, url
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            _out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0 and "observer stopped" in err, err
        if system is not None:
            system.shutdown()
        hayata(data_dir, "system", "kill")


def test_page_shows_the_live_tree_kills_through_the_page_and_streams_events(
        observed: tuple[Path, hy.AgentSystem, str], tmp_path: Path) -> None:
    data_dir, system, url = observed
    from selenium.webdriver.common.by import By

    driver = chrome()
    try:
        driver.get(url)
        # The token leaves the address bar once the page has it.
        eventually(lambda: "token" not in driver.current_url, message="token hidden")

        # The tree with the pids tree() reports, every row of it.
        expected = tree_pids(system.tree())
        assert NODE in expected and AGENT in expected, expected
        eventually(lambda: page_pids(driver) == expected, message="the page shows tree()'s pids")

        # Kill the node through the page, with its confirmation and CLI command.
        old = expected[NODE]
        click(driver, f'button.kill[data-path="{NODE}"]')
        dialog_cli = driver.find_element(By.ID, "confirm-cli").text
        assert dialog_cli == f"hayata kill hello --node echo --data-dir {data_dir}"
        click(driver, "#confirm-ok")
        eventually(lambda: not alive(old), message="the node process is killed")
        new = eventually(lambda: (p := tree_pids(system.tree()).get(NODE)) not in (None, old)
                         and p, timeout=30, message="tree() reports the node's new pid")
        eventually(lambda: page_pids(driver).get(NODE) == new,
                   message="the page shows the replacement pid, without a reload")
        log = text(driver, "#log")
        assert "Kill node node:echo" in log and dialog_cli in log

        # A kill from a shell shows up just the same.
        agent_pid = page_pids(driver)[AGENT]
        os.kill(agent_pid, signal.SIGKILL)
        killed = time.monotonic()
        eventually(lambda: page_pids(driver).get(AGENT) not in (None, agent_pid), timeout=30,
                   message="the page shows the agent's new pid")
        print(f"agent killed from a shell: new pid on the page after "
              f"{time.monotonic() - killed:.2f}s")
        eventually(lambda: page_pids(driver) == tree_pids(system.tree()),
                   message="page and tree() agree again")

        # Run an invocation from the page and watch its events arrive in order.
        click(driver, 'tr[data-agent="hello"] button.run')
        field = driver.find_element(By.ID, "confirm-input")
        field.clear()
        field.send_keys('"hi"')
        assert driver.find_element(By.ID, "confirm-cli").text == (
            f"hayata run hello --input '\"hi\"' --stream --data-dir {data_dir}")
        click(driver, "#confirm-ok")
        eventually(lambda: driver.find_elements(By.CSS_SELECTOR, "#events li.result"),
                   timeout=30, message="the invocation's result on the page")
        events = driver.execute_script(  # one read: the page re-renders on live updates
            "return [...document.querySelectorAll('#events li.event')]"
            ".map(e => [e.dataset.sequence, e.querySelector('.type').textContent.trim()]);")
        assert [int(sequence) for sequence, _ in events] == [1, 2, 3, 4]
        assert [kind for _, kind in events] == [
            "invocation_started", "node_started", "node_completed", "invocation_completed"]
        result = text(driver, "#events li.result")
        assert '"answer":"echo:hi"' in result
        # Its durable task, with its recovery class.
        eventually(lambda: "completed" in text(driver, "#tasks tbody tr .class"),
                   message="the task table")

        # An unfinished invocation whose task is uncertain: resolved from the page
        # with the same command as from a shell.
        _ref, _invocation, task = uncertain_slow(system, tmp_path)
        eventually(lambda: "recovery_required" in text(driver, 'tr[data-agent="slow"]'),
                   timeout=30, message="the page shows slow as recovery_required")
        screenshot(driver, "observer.png")
        click(driver, 'tr[data-agent="slow"]')
        eventually(lambda: driver.find_elements(By.CSS_SELECTOR, "button.resolve"),
                   message="the uncertain task's resolve button")
        click(driver, "button.resolve")
        assert driver.find_element(By.ID, "confirm-cli").text == (
            f"hayata resolve slow {task} --result '{{}}' --data-dir {data_dir}")
        screenshot(driver, "observer-resolve.png")
        click(driver, "#confirm-cancel")
    finally:
        driver.quit()
