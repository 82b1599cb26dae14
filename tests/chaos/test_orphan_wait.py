"""When the concurrent campaign reads the classes after the agent alone died or
froze: once every task a live edge started has its end recorded, whether or
not its node wrote an ``end`` line (a task the agent cancelled on a live
``async def`` edge ends without one)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from tests.chaos.concurrent import ConcurrentCampaign, Member, _sessions

pytestmark = pytest.mark.timeout(30)


def _no_such_pid() -> int:
    """A pid no process can have: the kernel hands out pids below pid_max."""
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def _campaign(tmp_path: Path, lines: list[str], statuses: dict[str, str]) -> ConcurrentCampaign:
    effects = tmp_path / "effects.log"
    effects.write_text("".join(f"{line}\n" for line in lines))
    campaign = ConcurrentCampaign.__new__(ConcurrentCampaign)
    records = [SimpleNamespace(task_id=task, status=status, node_id="llm")
               for task, status in statuses.items()]
    campaign.system = SimpleNamespace(  # type: ignore[assignment]
        store=SimpleNamespace(get_tasks=lambda _inv: records))
    campaign.members = [Member("inv-1", effects, None, False, ("llm",))]
    campaign.data = tmp_path / "data"
    campaign.store_url = f"sqlite:///{tmp_path / 'data' / 'hayata.db'}"
    return campaign


def test_a_cancelled_task_on_a_live_edge_counts_once_recorded(tmp_path: Path) -> None:
    live = f"start t1 llm {os.getpid()}"
    assert _campaign(tmp_path, [live], {"t1": "failed"})._orphans_done()
    assert not _campaign(tmp_path, [live], {"t1": "started"})._orphans_done()


def test_a_task_whose_edge_is_gone_is_not_waited_for(tmp_path: Path) -> None:
    gone = f"start t1 llm {_no_such_pid()}"
    assert _campaign(tmp_path, [gone], {"t1": "started"})._orphans_done()


def test_a_wait_that_times_out_says_which_task_and_what_the_log_says(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, [f"start t1 llm {os.getpid()}", f"start t2 llm {os.getpid()}"],
                         {"t1": "started", "t2": "completed"})
    campaign.data.mkdir()
    (campaign.data / "hayata.log.jsonl").write_text(
        '{"event": "task_cancelled", "task_id": "t1"}\n'
        '{"event": "task_completed", "task_id": "t2"}\n')
    report = campaign._orphans_report()
    assert f"task t1 (node llm, invocation inv-1) on edge pid {os.getpid()} (running)" in report
    assert "task t2" not in report.split("; log: ")[0]
    assert report.endswith('log: {"event": "task_cancelled", "task_id": "t1"}')


def test_the_report_names_a_postgresql_session_left_in_a_transaction(pg_url: str) -> None:
    """What a wait on a lock waits for: a session that holds a transaction open."""
    engine = sa.create_engine(pg_url, connect_args={"application_name": "holder-42"})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("CREATE TABLE held (n int)"))
            conn.execute(sa.text("INSERT INTO held VALUES (1)"))  # the transaction stays open
            report = _sessions(pg_url)
            assert "holder-42 idle in transaction" in report
            assert "INSERT INTO held" in report
            conn.rollback()
        assert "holder-42" not in _sessions(pg_url)
    finally:
        engine.dispose()
