"""A one_for_one supervisor restarting two workers: one SIGKILLed, one crashing.

Run from the repository root::

    python examples/supervision_demo.py
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

# Actor processes import worker classes by module path (examples.demo_actors),
# so the repository root must be importable whichever way this script is run.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.demo_actors import Crash, Work, Worker
from supervisors import (
    ChildInfo,
    ChildSpec,
    Start,
    Strategy,
    SupervisorFlags,
    SupervisorRef,
    System,
)

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], what: str, timeout: float = 3.0) -> T:
    """Call ``probe`` until it returns a value, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (value := probe()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.005)
    return value


def replaced(sup: SupervisorRef, child_id: str, old_pid: int | None) -> ChildInfo | None:
    """The child's row once it runs again under a new pid, else None."""
    info = sup.child(child_id)
    return info if info.status == "running" and info.pid != old_pid else None


def show(sup: SupervisorRef) -> None:
    for info in sup.which_children():
        print(f"    {info.id:<6} pid={info.pid!s:<7} status={info.status:<8} "
              f"restarts={info.restarts}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log_file = Path(tmp) / "supervisors.jsonl"
        with System(log_file=log_file) as system:
            sup = system.start_supervisor(
                "demo",
                SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=3, period=5.0),
                [ChildSpec("alpha", Start(Worker, ("alpha",))),
                 ChildSpec("beta", Start(Worker, ("beta",)))],
            )
            print(f"supervisor 'demo' runs as pid {sup.pid}; its children:")
            show(sup)

            alpha = sup.child("alpha")
            assert alpha.pid is not None
            print(f"\n1. SIGKILL alpha (pid {alpha.pid})")
            killed_at = time.monotonic()
            os.kill(alpha.pid, signal.SIGKILL)
            new_alpha = wait_for(lambda: replaced(sup, "alpha", alpha.pid), "alpha restart")
            answer = system.ask(new_alpha.address, Work("hello"), 5)
            print(f"   replaced in {(time.monotonic() - killed_at) * 1000:.0f} ms by pid "
                  f"{new_alpha.pid} (restarts={new_alpha.restarts}); it answers {answer}")

            beta = sup.child("beta")
            print(f"\n2. make beta's handler raise (pid {beta.pid})")
            system.tell(beta.address, Crash("bug in beta"))
            new_beta = wait_for(lambda: replaced(sup, "beta", beta.pid), "beta restart")
            answer = system.ask(new_beta.address, Work("again"), 5)
            print(f"   restarted as pid {new_beta.pid} (restarts={new_beta.restarts}); "
                  f"it answers {answer}")

            print("\nchildren now:")
            show(sup)
        print(f"\nshut down; processes of the system left: {len(system.processes())}")
        print("supervisor decisions (from the JSON log):")
        for line in log_file.read_text().splitlines():
            event = json.loads(line)
            if event["event"] in ("child_exited", "child_restarted"):
                detail = event.get("reason") or f"restarts={event.get('restarts')}"
                print(f"    {event['timestamp'][11:23]}  {event['event']:<15} "
                      f"{event['child']:<6} pid={event['child_pid']}  {detail}")


if __name__ == "__main__":
    main()
