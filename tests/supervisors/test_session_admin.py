"""Which process of an actor session is its admin (``System.admin_pid``):
never the session's leader, the process that called ``setsid()`` and forked
the admin, even while that leader has not exited yet (under load it may
linger; taking it for the admin made every later wait say the system died
once it had gone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from supervisors._sessions import listener_pid, session_admin
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(30)

# The shape Thespian gives a system: a leader that called setsid() (here it
# stays), an admin it forked that listens, and a logger the admin forked
# that inherits the listening socket. Each prints its pid; the admin its port.
TREE = r"""
import os, socket, sys, time
os.setsid()
print("leader", os.getpid(), flush=True)
if os.fork() == 0:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    print("admin", os.getpid(), listening.getsockname()[1], flush=True)
    if os.fork() == 0:
        print("logger", os.getpid(), flush=True)
    time.sleep(60)
    sys.exit(0)
time.sleep(60)
"""


@pytest.fixture
def tree() -> Iterator[dict[str, int]]:
    """The three processes, running; killed (the whole session) at the end."""
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    found: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        while len(found) < 4:
            kind, pid, *port = proc.stdout.readline().split()
            found[kind] = int(pid)
            if port:
                found["port"] = int(port[0])
        yield found
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        eventually(lambda: not _alive(found.get("admin")) and not _alive(found.get("logger")),
                   timeout=10, message="the session's processes gone")


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except FileNotFoundError:
        return False
    return text[text.rfind(b")") + 2:][:1] != b"Z"


def test_the_admin_is_not_the_session_leader_still_running(tree: dict[str, int]) -> None:
    assert tree["leader"] == os.getsid(tree["admin"]), "the leader leads the session"
    assert session_admin(tree["leader"]) == tree["admin"]
    assert listener_pid(tree["port"]) == tree["admin"]


def test_the_admin_once_its_leader_has_exited(tree: dict[str, int]) -> None:
    os.kill(tree["leader"], signal.SIGKILL)  # as Thespian's forking process exits
    eventually(lambda: not _alive(tree["leader"]), timeout=10, message="the leader gone")
    assert session_admin(tree["leader"]) == tree["admin"]
    assert listener_pid(tree["port"]) == tree["admin"]
