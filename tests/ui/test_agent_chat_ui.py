"""agent-chat-ui against ``hayata serve``, in headless Chromium (``make test-ui``).

The app is create-agent-chat-app's vite template from npm, built once into
tests/ui/.cache (tests/ui/build.py), served from a loopback HTTP server of
this process; ``hayata serve`` serves tests/ui/graphs.py's ``agent`` on
another loopback port, with that page's origin allowed (CORS). The page is
opened with ``?apiUrl=...&assistantId=agent``, as the app's setup form would
set them, and driven with Selenium as a person would: type, send, read the
page, press Accept, reload. Not part of ``make test`` (tests/conftest.py
collects tests/ui only when named).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from langgraph_sdk import get_sync_client

from tests import node
from tests.observer_util import chrome, click
from tests.serve.launch import Served, serve_env, start
from tests.serve_api.reference import free_port
from tests.ui import build
from tests.ui.graphs import GATE_ENV, SLOW_END, SLOW_FIRST, WEATHER

pytestmark = pytest.mark.timeout(900)

HERE = Path(__file__).resolve().parent
PAGE_TIMEOUT = 60.0


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """The built app on a loopback port of this process; its origin."""
    found = node.find()
    if found is None:
        pytest.fail(node.MISSING)
    started = time.monotonic()
    dist = build.build(found)
    print(f"agent-chat-ui ready in {time.monotonic() - started:.1f}s")
    handler = functools.partial(_Quiet, directory=str(dist))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def served(site: str) -> Iterator[Served]:
    """``hayata serve`` of tests/ui/langgraph.json, the page's origin allowed;
    the slow node's gate is ``<workdir>/gate``."""
    workdir = Path(tempfile.mkdtemp(prefix="hayata-ui-"))
    server = None
    try:
        for name in ("langgraph.json", "graphs.py"):
            shutil.copy(HERE / name, workdir / name)
        server = start(workdir, workdir / "data", workdir / "serve.log",
                       args=("--cors-origin", site),
                       env=serve_env(**{GATE_ENV: str(workdir / "gate")}))
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def page(site: str, served: Served) -> Iterator[Any]:
    """Chromium on a new chat with the served agent."""
    driver = chrome()
    try:
        driver.get(f"{site}/?{urlencode({'apiUrl': served.url, 'assistantId': 'agent'})}")
        wait(lambda: driver.find_elements("css selector", "textarea"), "the chat input")
        yield driver
    finally:
        driver.quit()


def wait(condition: Callable[[], Any], what: str, timeout: float = PAGE_TIMEOUT) -> Any:
    """``condition()``'s first truthy value, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)
    return value


def text(driver: Any) -> str:
    return str(driver.execute_script("return document.body.innerText"))


_BUTTON = ("const b = [...document.querySelectorAll('button')]"
           ".find(e => e.textContent.trim() === arguments[0]);")


def has_button(driver: Any, label: str) -> bool:
    return bool(driver.execute_script(_BUTTON + " return !!b;", label))


def press(driver: Any, label: str) -> bool:
    """Click the button labelled ``label``, found and clicked in one step of the
    page's script (the page re-renders as events arrive); False if none is there."""
    return bool(driver.execute_script(_BUTTON + " if (b) b.click(); return !!b;", label))


def send(driver: Any, message: str) -> str:
    """Type ``message``, send it; the thread id the page then shows in its URL."""
    driver.find_element("css selector", "textarea").send_keys(message)
    click(driver, "button[type=submit]")
    return str(wait(lambda: parse_qs(urlsplit(driver.current_url).query).get(
        "threadId", [""])[0], "the thread id in the page's URL"))


def runs(served: Served, thread_id: str) -> list[dict[str, Any]]:
    with get_sync_client(url=served.url, timeout=30.0) as client:
        return [dict(run) for run in client.runs.list(thread_id)]


def thread_status(served: Served, thread_id: str) -> str:
    with get_sync_client(url=served.url, timeout=30.0) as client:
        return str(client.threads.get(thread_id)["status"])


def test_a_message_gets_the_streamed_answer(page: Any, served: Served) -> None:
    """The page streams its run (token chunks in ``messages-tuple``) and shows the answer."""
    thread_id = send(page, "hello hayata")
    wait(lambda: "You said: hello hayata" in text(page), "the answer on the page")
    wait(lambda: [r["status"] for r in runs(served, thread_id)] == ["success"],
         "the run done")
    [run] = runs(served, thread_id)
    assert {"values", "messages-tuple"} <= set(run["kwargs"]["stream_mode"])


def test_an_interrupt_is_approved_on_the_page(page: Any, served: Served) -> None:
    """The tool call waits on ``interrupt()``; the page's Accept resumes it."""
    thread_id = send(page, "what is the weather?")
    wait(lambda: has_button(page, "Accept"), "the interrupt's Accept button")
    assert "Let me look that up." in text(page)
    assert thread_status(served, thread_id) == "interrupted"
    wait(lambda: press(page, "Accept"), "pressing Accept")
    wait(lambda: f"The tool says: {WEATHER}." in text(page), "the answer after the tool")
    wait(lambda: thread_status(served, thread_id) == "idle", "the thread idle")
    assert [r["status"] for r in runs(served, thread_id)] == ["success", "success"]


def test_a_reload_mid_run_rejoins_the_run(page: Any, served: Served) -> None:
    """Reloaded while the run streams (its first answer shown, its second node
    waiting), the page rejoins the same run's stream (the run is not cancelled,
    nor sent again) and shows the rest when it comes."""
    thread_id = send(page, "tell me slowly")
    wait(lambda: SLOW_FIRST in text(page), "the first answer")
    [run] = runs(served, thread_id)
    assert run["status"] == "running"
    # reconnectOnMount (tests/ui/build.py): a resumable run the page may leave
    assert (run["kwargs"]["resumable"], run["kwargs"]["on_disconnect"]) == (True, "continue")
    page.refresh()
    wait(lambda: SLOW_FIRST in text(page), "the first answer after the reload")
    assert SLOW_END not in text(page)
    assert [r["status"] for r in runs(served, thread_id)] == ["running"]
    (served.workdir / "gate").touch()  # the slow node answers now
    wait(lambda: SLOW_END in text(page), "the rest of the answer after the reload")
    wait(lambda: [r["status"] for r in runs(served, thread_id)] == ["success"],
         "the run done (one run, not cancelled)")
    assert text(page).count(SLOW_END) == 1
