"""Make docs/observer.png and docs/observer-resolve.png: the observer page after a drill.

Run from the repository root: ``python -m tests.observer_screenshot docs/observer.png``.
Agent ``hello`` ran once from the page and had its node killed through it;
agent ``slow`` holds an unfinished invocation with an uncertain task.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import hayata_py as hy
from hayata_py._observer import observe
from tests.cli_fixtures import config
from tests.helpers import eventually, find
from tests.observer_util import Client, chrome, click, uncertain_slow


def main(target: str) -> None:
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory() as tmp, hy.AgentSystem(Path(tmp) / "data") as system:
        system.start_agent(config)
        _ref, _invocation, _task = uncertain_slow(system, Path(tmp))
        with observe(system, port=0) as observer:
            client = Client(observer.url)
            node = find(system.tree(), "node", "node:echo")
            assert node is not None
            client.post("/api/kill", {"path": ["agent:hello", "nodes", "node:echo"],
                                      "pid": node["pid"]})
            driver = chrome("1400,860")
            try:
                driver.get(observer.url)
                eventually(lambda: driver.find_elements(By.CSS_SELECTOR, 'tr[data-agent]'))
                click(driver, 'tr[data-agent="hello"] button.run')
                field = driver.find_element(By.ID, "confirm-input")
                field.clear()
                field.send_keys('"hi"')
                click(driver, "#confirm-ok")
                eventually(lambda: driver.find_elements(By.CSS_SELECTOR, "#events li.result"))
                eventually(lambda: "completed" in driver.find_element(
                    By.CSS_SELECTOR, "#tasks tbody").text)
                driver.save_screenshot(target)
                click(driver, 'tr[data-agent="slow"]')
                eventually(lambda: driver.find_elements(By.CSS_SELECTOR, "button.resolve"))
                click(driver, "button.resolve")
                driver.save_screenshot(str(Path(target).with_name("observer-resolve.png")))
            finally:
                driver.quit()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/observer.png")
