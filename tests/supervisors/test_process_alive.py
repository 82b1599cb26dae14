"""``supervisors.process_alive`` (what ``AgentRef`` asks before every call to an
agent): a zombie counts as gone, since a container's PID 1 may never reap it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from supervisors import process_alive
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(30)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        text = stat.read()
    return text[text.rfind(b")") + 2:][:1].decode()


@pytest.fixture(params=["linux", "other"])
def platform(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of asking: one /proc read on Linux, psutil on other systems."""
    if request.param == "other":
        monkeypatch.setattr(sys, "platform", "darwin")
    return str(request.param)


def test_a_running_process_is_alive(platform: str) -> None:
    assert process_alive(os.getpid()) is True
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_alive(child.pid) is True
    finally:
        child.kill()
        child.wait()


def test_a_zombie_and_a_reaped_process_are_not_alive(platform: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    eventually(lambda: _state(child.pid) == "Z", timeout=20, message="the child is a zombie")
    assert process_alive(child.pid) is False  # exited, not reaped yet
    child.wait()
    assert process_alive(child.pid) is False
