"""Every line of ``hayata ps`` has its OS pid, the top supervisor's included."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from supervisors import ChildSpec, SupervisorFlags, SupervisorRef, System
from tests.cli.test_cli import hayata, ok
from tests.helpers import walk
from tests.sup_actors import Echo


def test_a_ref_made_from_an_address_alone_learns_the_pid(system: System) -> None:
    sup = system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo)])
    found = SupervisorRef(system, sup.address, "top", 0)
    assert found.pid == sup.pid and found.pid > 0


@pytest.mark.timeout(90)
def test_ps_shows_the_pid_of_every_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    try:
        ok(data_dir, "system", "start")
        ok(data_dir, "agent", "start", "tests.cli_fixtures:config")
        tree = json.loads(ok(data_dir, "ps", "--json"))
        session = json.loads((data_dir / "system.json").read_text())["session_id"]
        rows = list(walk(tree))
        assert tree["id"] == "hayata" and len(rows) > 5
        for row in rows:
            assert isinstance(row["pid"], int), row
            assert os.getsid(row["pid"]) == session, row
        assert f"supervisor hayata  pid {tree['pid']}  " in ok(data_dir, "ps")
    finally:
        hayata(data_dir, "system", "kill")
