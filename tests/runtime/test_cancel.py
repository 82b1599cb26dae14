"""``AgentRef.cancel``: a running invocation stopped in the middle of a node.

The node blocks until a gate file exists (the test never creates it): only the
cancel can end it. What must hold afterwards: the completed step stays
completed, the stopped task is recorded ``cancelled`` (never ``started``), its
edge process is gone, the event log and the caller's stream end, and the
thread's next run (queued behind the cancelled one) runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

import hayata_py as hy

pytestmark = pytest.mark.timeout(120)

NODES = {"ok": "tests.graph_nodes:worker", "w": "tests.graph_nodes:touch_and_wait"}


def until(probe: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {value!r})")
        time.sleep(0.01)


def blocked_run(tmp_path: Path, label: str) -> dict[str, Any]:
    """A run whose step 0 completes and whose step 1 blocks in node ``w``."""
    return {"steps": [["next", "ok", {"result": label}],
                      ["next", "w", {"pid_file": str(tmp_path / f"{label}.pid"),
                                     "gate": str(tmp_path / "never"), "sleep": 90}],
                      ["finish", label]]}


def edge_pid(tmp_path: Path, label: str) -> int:
    pid_file = tmp_path / f"{label}.pid"
    return int(until(lambda: pid_file.exists() and pid_file.read_text(), "node w started"))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_cancel_stops_the_running_node_and_keeps_completed_steps(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    agent = agents.start_agent(hy.AgentConfig("cancelling", NODES, "tests.graph_nodes:scripted",
                                                 max_invocations=4))
    first = agent.run(blocked_run(tmp_path, "a"), subscriber=hy.CALLER, stream=True,
                      thread="t")
    pid = edge_pid(tmp_path, "a")
    (tmp_path / "open").touch()
    queued = agent.run({"steps": [["next", "w", {"pid_file": str(tmp_path / "b.pid"),
                                                 "gate": str(tmp_path / "open")}],
                                  ["finish", "b"]]}, thread="t", multitask="enqueue")

    result = agent.cancel(first)

    assert (result.ok, result.status, result.error and result.error.code) == (
        False, "cancelled", "cancelled")
    assert agent.get_result(first) == result
    tasks = {record.node_id: record for record, _ in agent.tasks(first)}
    assert tasks["ok"].status == "completed"
    assert tasks["w"].status == "failed"
    assert tasks["w"].error is not None and tasks["w"].error["code"] == "cancelled"
    assert result.error is not None and result.error.details["tasks"] == [tasks["w"].task_id]
    until(lambda: gone(pid), f"the cancelled task's edge process {pid} gone")
    messages = list(agent.messages(first, timeout=30))
    assert messages[-1] == result
    assert [m.type for m in messages[:-1] if isinstance(m, hy.AgentEvent)][-1] \
        == "invocation_failed"
    events = list(agent.events(first))
    assert (events[-1].type, events[-1].data["reason"]) == ("invocation_failed", "cancelled")

    # The thread is free: the queued run starts, and runs node w on a new edge.
    after = agent.wait(queued, timeout=60)
    assert (after.ok, after.result) == (True, "b")
    assert edge_pid(tmp_path, "b") != pid
    assert agent.status() == "idle"
    # A finished invocation: a cancel is a no-op that returns its result.
    assert agent.cancel(first) == result
    assert agent.cancel(queued) == after


def test_cancel_refuses_unknown_ids(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig("refusing", NODES, "tests.graph_nodes:scripted"))
    with pytest.raises(hy.HayataError) as caught:
        agent.cancel("no-such-invocation")
    assert caught.value.code == "not_found"


def test_async_cancel(tmp_path: Path) -> None:
    import asyncio

    async def main() -> tuple[str, str]:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(
                hy.AgentConfig("async-cancel", NODES, "tests.graph_nodes:scripted"))
            inv = await agent.run(blocked_run(tmp_path, "c"))
            await asyncio.to_thread(edge_pid, tmp_path, "c")
            result = await agent.cancel(inv)
            return result.status, (await agent.tasks(inv))[-1][0].status

    assert asyncio.run(main()) == ("cancelled", "failed")


def test_cancel_of_an_async_task_keeps_its_shared_edge(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """An ``async def`` node's edge runs several tasks: a cancel cancels the
    task's coroutine only, and the same edge process runs the next task."""
    marks = tmp_path / "marks"
    marks.mkdir()
    agent = agents.start_agent(hy.AgentConfig(
        "cancel-async", {"ok": "tests.graph_nodes:worker", "s": "tests.edge_nodes:sleeper"},
        "tests.graph_nodes:scripted", edge_concurrency={"s": 2}))

    def pids(event: str) -> list[int]:
        return [int(p.name.rsplit("-", 1)[1]) for p in marks.iterdir()
                if p.name.startswith(f"{event}-")]

    first = agent.run({"steps": [["next", "ok", {}],
                                 ["next", "s", {"dir": str(marks),
                                                "gate": str(tmp_path / "never")}],
                                 ["finish", "a"]]})
    [pid] = until(lambda: pids("start"), "the async node started")
    result = agent.cancel(first)
    assert (result.status, [(r.node_id, r.status) for r, _ in agent.tasks(first)]) == (
        "cancelled", [("ok", "completed"), ("s", "failed")])
    (tmp_path / "open").touch()
    second = agent.invoke({"steps": [["next", "s", {"dir": str(marks),
                                                    "gate": str(tmp_path / "open")}],
                                     ["finish", "b"]]}, timeout=60)
    assert (second.ok, second.result) == (True, "b")
    assert pids("end") == [pid] and not gone(pid)  # the cancelled one never ended
