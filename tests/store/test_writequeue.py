"""The SQLite writers' queue (``store/_fast/writequeue.py``): a hold excludes every
other thread and process, a forked child never shares its parent's hold, the
kernel frees the hold of a process that is killed, and a queue file that
cannot be opened only means no queue."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hayata_py.store._fast.writequeue import WriteQueue, queue_for
from tests.helpers import freeze

pytestmark = pytest.mark.timeout(60)

HOLDER = """
import sys
from hayata_py.store._fast.writequeue import WriteQueue
with WriteQueue(sys.argv[1]).hold():
    print("held", flush=True)
    sys.stdin.readline()
"""


def taken(queue: WriteQueue) -> bool:
    """Someone holds the queue (probed on a descriptor of its own, never waiting)."""
    fd = os.open(queue.path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing it drops a hold taken by the probe
    return False


def holder(db: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_hold_in_another_process_makes_a_writer_wait_its_turn(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    queue = WriteQueue(str(db))
    proc = holder(db)
    try:
        got = threading.Event()

        def write() -> None:
            with queue.hold():
                got.set()

        waiter = threading.Thread(target=write, daemon=True)
        waiter.start()
        assert taken(queue) and not got.is_set()
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert got.wait(30), "the writer never got its turn"
        waiter.join(30)
        assert not taken(queue)  # released at the end of the block
    finally:
        proc.kill()
        proc.wait(30)


def test_the_kernel_frees_the_hold_of_a_killed_process(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    proc = holder(db)
    assert taken(WriteQueue(str(db)))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert not taken(WriteQueue(str(db)))
    with WriteQueue(str(db)).hold():
        pass


def test_a_writer_never_waits_on_a_stopped_holder(tmp_path: Path) -> None:
    """A holder frozen (SIGSTOP) would hold every writer for as long as it is
    stopped: a writer that finds it so goes to SQLite's lock (which has a deadline)."""
    db = tmp_path / "x.db"
    proc = holder(db)
    # A signal is delivered asynchronously: freeze() returns once the holder's
    # state says it stopped (a writer that looked before would rightly wait).
    freeze(proc.pid)
    try:
        done = threading.Event()

        def write() -> None:
            with WriteQueue(str(db)).hold():
                done.set()

        threading.Thread(target=write, daemon=True).start()
        assert done.wait(30), "a writer waited on a stopped holder"
        assert taken(WriteQueue(str(db)))  # the frozen one still holds it
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(30)


def test_threads_of_one_process_queue_too(tmp_path: Path) -> None:
    queue = queue_for(str(tmp_path / "x.db"))
    inside, release, seen = threading.Event(), threading.Event(), []

    def first() -> None:
        with queue.hold():
            inside.set()
            release.wait(30)

    t = threading.Thread(target=first, daemon=True)
    t.start()
    assert inside.wait(30)

    def second() -> None:
        with queue.hold():
            seen.append(release.is_set())

    u = threading.Thread(target=second, daemon=True)
    u.start()
    u.join(0.2)  # a bounded join: it must still be waiting
    assert u.is_alive() and not seen
    release.set()
    t.join(30)
    u.join(30)
    assert seen == [True]


def test_a_forked_child_does_not_share_its_parent_s_hold(tmp_path: Path) -> None:
    queue = WriteQueue(str(tmp_path / "x.db"))
    with queue.hold():
        pid = os.fork()
        if pid == 0:  # the child: its own descriptor, so the parent's hold excludes it
            try:
                fcntl.flock(queue._fd(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os._exit(0)
            os._exit(1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child took the parent's hold"


def test_a_queue_file_that_cannot_be_opened_means_no_queue(tmp_path: Path) -> None:
    queue = WriteQueue(str(tmp_path / "no-such-dir" / "x.db"))
    with queue.hold():  # nothing to wait for; SQLite's own lock still guards
        pass
    assert not (tmp_path / "no-such-dir").exists()
