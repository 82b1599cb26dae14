"""A system whose admin comes up too late for Thespian (it waits a fixed
5 s for the admin to say it is up) fails to start and leaves nothing
running: the late admin's session is killed, not left without an owner.
Made deterministic by giving the admin 1 ms."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from thespian.system import multiprocCommon

from supervisors import System
from supervisors._sessions import session_processes
from supervisors._thespian.child_exits import admin_starters
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(60)


def test_a_late_admin_is_killed_when_the_start_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(multiprocCommon, "MAX_ADMIN_STARTUP_DELAY", timedelta(milliseconds=1))
    with admin_starters() as started, \
            pytest.raises(Exception, match="not a valid ActorSystem admin"):
        System(log_file=tmp_path / "sup.jsonl")
    monkeypatch.undo()
    [session] = started
    eventually(lambda: not session_processes(session), timeout=15,
               message="no process of the failed start left running")
