"""When the concurrent campaign reads the classes after the agent alone died or
froze: once every task a live edge started has its end recorded, whether or
not its node wrote an ``end`` line (a task the agent cancelled on a live
``async def`` edge ends without one)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.chaos.concurrent import ConcurrentCampaign, Member

pytestmark = pytest.mark.timeout(30)


def _no_such_pid() -> int:
    """A pid no process can have: the kernel hands out pids below pid_max."""
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def _campaign(tmp_path: Path, lines: list[str], statuses: dict[str, str]) -> ConcurrentCampaign:
    effects = tmp_path / "effects.log"
    effects.write_text("".join(f"{line}\n" for line in lines))
    campaign = ConcurrentCampaign.__new__(ConcurrentCampaign)
    records = [SimpleNamespace(task_id=task, status=status) for task, status in statuses.items()]
    campaign.system = SimpleNamespace(  # type: ignore[assignment]
        store=SimpleNamespace(get_tasks=lambda _inv: records))
    campaign.members = [Member("inv-1", effects, None, False, ("llm",))]
    return campaign


def test_a_cancelled_task_on_a_live_edge_counts_once_recorded(tmp_path: Path) -> None:
    live = f"start t1 llm {os.getpid()}"
    assert _campaign(tmp_path, [live], {"t1": "failed"})._orphans_done()
    assert not _campaign(tmp_path, [live], {"t1": "started"})._orphans_done()


def test_a_task_whose_edge_is_gone_is_not_waited_for(tmp_path: Path) -> None:
    gone = f"start t1 llm {_no_such_pid()}"
    assert _campaign(tmp_path, [gone], {"t1": "started"})._orphans_done()
