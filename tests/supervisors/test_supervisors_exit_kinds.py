"""`ChildEvent.exit` names why a child exited, typed, on real processes."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from supervisors import (
    ChildInfo,
    ChildSpec,
    ExitKind,
    Restart,
    StopNormally,
    SupervisorFlags,
    System,
)
from tests.helpers import eventually
from tests.sup_actors import Echo, EventRecorder


def test_each_exit_is_reported_with_its_kind(system: System, tmp_path: Path) -> None:
    events = tmp_path / "events.txt"
    names = ("normal", "raised", "killed", "terminated")
    children = [ChildSpec(name, Echo, restart=Restart.TRANSIENT) for name in names]
    rec = system.start_supervisor("rec", SupervisorFlags(intensity=10), children,
                                  actor=EventRecorder, extra_args=(str(events),))
    by_id = {info.id: info for info in rec.which_children()}

    def kill(info: ChildInfo) -> None:
        assert info.pid is not None
        os.kill(info.pid, signal.SIGKILL)

    causes: dict[str, Callable[[ChildInfo], None]] = {
        "normal": lambda info: system.tell(info.address, StopNormally()),
        "raised": lambda info: system.tell(info.address, ("raise", "boom")),
        "killed": kill,
        "terminated": lambda info: rec.terminate_child(info.id),
    }
    for name in names:  # one at a time: each exit is seen before the next one
        causes[name](by_id[name])

        def exited(child: str = name) -> str | None:
            rows = [line.split() for line in events.read_text().splitlines()]
            return next((exit for kind, cid, exit in rows
                         if kind == "exited" and cid == child), None)

        eventually(exited, message=f"{name} exit")

    rows = [line.split() for line in events.read_text().splitlines()]
    assert {cid: exit for kind, cid, exit in rows if kind == "exited"} == {
        "normal": ExitKind.NORMAL.value, "raised": ExitKind.CRASHED.value,
        "killed": ExitKind.KILLED.value, "terminated": ExitKind.SHUTDOWN.value,
    }
