"""``hayata_py._ref.alive``: the liveness check asked before every call to an
agent (a zombie counts as gone: a container's PID 1 may never reap it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hayata_py import _ref
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(30)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        text = stat.read()
    return text[text.rfind(b")") + 2:][:1].decode()


def test_a_running_process_is_alive() -> None:
    assert _ref.alive(os.getpid()) is True
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _ref.alive(child.pid) is True
    finally:
        child.kill()
        child.wait()


def test_a_zombie_and_a_reaped_process_are_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    eventually(lambda: _state(child.pid) == "Z", timeout=20, message="the child is a zombie")
    assert _ref.alive(child.pid) is False  # exited, not reaped yet
    child.wait()
    assert _ref.alive(child.pid) is False


def test_the_same_answers_as_psutil_without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    eventually(lambda: _state(child.pid) == "Z", timeout=20, message="the child is a zombie")
    monkeypatch.setattr(_ref, "_PROC", False)
    assert _ref.alive(os.getpid()) is True
    assert _ref.alive(child.pid) is False
    child.wait()
    assert _ref.alive(child.pid) is False
