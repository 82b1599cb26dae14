"""``AgentSystem(exit_with_owner=True)``: the actor processes end once the
process that created the system is SIGKILLed alone (its actors live in a
session of their own, which a kill of it does not reach)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.serve_api.support import wait_until

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent.parent
OWNER = """
import sys, time
import hayata_py as hy
system = hy.AgentSystem(sys.argv[1], exit_with_owner=True)
print(system.session_id, flush=True)
while True:
    time.sleep(1)
"""


def _session_pids(session: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == session:
            pids.append(int(stat.parent.name))
    return pids


def test_the_actors_end_with_the_process_that_owns_them(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "data")], stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    session = None
    try:
        assert owner.stdout is not None
        session = int(owner.stdout.readline())
        wait_until(lambda: len(_session_pids(session)) >= 2, "the admin and top supervisor up")
        alive = _session_pids(session)
        owner.kill()
        killed = time.monotonic()
        owner.wait(timeout=30)
        wait_until(lambda: not _session_pids(session), f"no process of {alive} left",
                   timeout=10)
        print(f"actors gone {time.monotonic() - killed:.3f}s after the owner's kill -9")
        assert "owner_gone" in (tmp_path / "data" / "hayata.log.jsonl").read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
        if session is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(session, signal.SIGKILL)
