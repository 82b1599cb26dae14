"""Helpers for the observer tests: a plain HTTP client, a drill that leaves an
uncertain task, a snapshot of everything an action could change, and Chromium."""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import hayata_py as hy
from hayata_py.store import TaskClass
from tests import browser
from tests.cli_fixtures import slow
from tests.helpers import eventually, find, pids, walk


class Client:
    """Requests to one observer, as a browser page or an attacker would send them."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = parts.query.removeprefix("token=")

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = "",
                origin: str | None = "", content_type: str = "application/json",
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        """``token``/``origin`` "" mean the right ones, None none at all."""
        sent = dict(headers or {})
        if token is not None:
            sent["X-Hayata-Token"] = token or self.token
        if origin is not None and method != "GET":
            sent["Origin"] = origin or self.base
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = content_type
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, {"text": text.decode(errors="replace")}

    def post(self, path: str, body: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        return self.request("POST", path, body, **kwargs)

    def messages(self) -> Iterator[dict[str, Any]]:
        """The event stream, message by message (close the generator to hang up)."""
        request = urllib.request.Request(f"{self.base}/api/events?token={self.token}")
        with urllib.request.urlopen(request, timeout=60) as response:
            for line in response:
                if line.startswith(b"data: "):
                    yield json.loads(line[len(b"data: "):])


def uncertain_slow(system: hy.AgentSystem, tmp_path: Path) -> tuple[hy.AgentRef, str, str]:
    """Start agent ``slow`` and leave it an unfinished invocation whose task is
    uncertain: the agent and the edge are killed while the node runs, before the
    edge records a result. Returns the agent, the invocation id and the task id."""
    ref = system.start_agent(slow())
    gate = tmp_path / "gate"
    invocation_id = ref.run(str(gate))
    eventually(lambda: [t for t, _c in ref.tasks(invocation_id) if t.status == "started"],
               message="the slow task started")
    tree = find(system.tree(), "supervisor", "agent:slow")
    assert tree is not None
    agent, edge = find(tree, "agent"), find(tree, "edge")
    assert agent is not None and edge is not None
    os.kill(agent["pid"], signal.SIGKILL)
    os.kill(edge["pid"], signal.SIGKILL)
    gate.touch()

    def restarted() -> bool:
        row = find(system.tree(), "supervisor", "agent:slow")
        new = find(row, "agent") if row is not None else None
        return new is not None and new["pid"] not in (None, agent["pid"])

    # Asked before its supervisor noticed, the dead agent would answer nothing.
    eventually(restarted, timeout=30, message="the agent restarted")
    eventually(lambda: ref.status() == "recovery_required", timeout=30,
               message="the restarted agent found the invocation unfinished")
    [(task, cls)] = ref.tasks(invocation_id)
    assert (task.status, cls) == ("started", TaskClass.UNCERTAIN), task
    return ref, invocation_id, task.task_id


def everything(system: hy.AgentSystem) -> dict[str, Any]:
    """What an action could change: every process, every actor's pid, every agent's
    status and every stored invocation and task."""
    store = system.store
    invocations = {}
    for agent_id in system.agents():
        for record in store.list_invocations(agent_id, limit=1000):
            invocations[record.invocation_id] = (record, store.get_tasks(record.invocation_id))
    return {"processes": pids(system),
            "actors": sorted((r["id"], r.get("pid")) for r in walk(system.tree())),
            "status": {a: _status(system.agent(a)) for a in system.agents()},
            "store": invocations}


def _status(ref: hy.AgentRef) -> tuple[str, str | None]:
    info = ref.status_info()
    return info.status, info.invocation_id


def click(driver: Any, selector: str) -> None:
    """Click the element ``selector`` names, found and clicked in one step of the
    page's script: the page re-renders on live updates, so an element found by
    one WebDriver call may be replaced before the next one clicks it."""
    found = driver.execute_script(
        "const e = document.querySelector(arguments[0]); if (e) e.click(); return !!e;",
        selector)
    assert found, f"nothing on the page matches {selector}"


def chrome(window: str = "1400,900") -> Any:
    """Headless Chromium driven by Selenium, as :func:`tests.browser.find` finds
    it (``make test`` gets one first: ``make browser``); fails, never skips, if
    there is none."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[dev]'")
    found = browser.find()
    if found is None:
        pytest.fail(browser.MISSING)
    options = webdriver.ChromeOptions()
    options.binary_location = found.browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--disable-gpu", f"--window-size={window}"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(found.driver))
