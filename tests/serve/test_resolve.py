"""The ``/hayata/`` ways out of a run a crash left waiting on an uncertain
node, against a real ``hayata serve`` subprocess killed -9 (with its actor
processes) while two runs' middle nodes run.

After the restart both runs end asking about their middle node. One is
resolved with the node's update: the same run goes on (its row, its event
log), ends ``success`` with that update used, and the node does not run
again. The other is abandoned: its run ends ``error`` (an ``Abandoned``
error event), its thread ``error``; the thread's next run starts from the
progress it kept. Bad bodies are 422s naming the field,
unknown threads and tasks 404s, a task no longer uncertain a 409.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.serve.launch import Served, hayata_serve, start
from tests.serve_api.support import STEPS, wait_until

pytestmark = pytest.mark.timeout(180)


FANOUT = "fanout"


@pytest.fixture
def served() -> Iterator[Served]:
    graphs = {STEPS: "./graphs.py:steps", FANOUT: "tests.serve.uncertain_graphs:fanout"}
    with hayata_serve(config={"graphs": graphs}) as server:
        yield server


def _tasks(served: Served, nodes: tuple[str, ...], status: str | None = None) -> int:
    """How many tasks of ``nodes`` the store has (in ``status``, if given)."""
    query = (f"SELECT count(*) FROM hayata_tasks WHERE node_id IN "
             f"({', '.join('?' for _ in nodes)})")
    args: tuple[str, ...] = nodes
    if status is not None:
        query += " AND status = ?"
        args = (*nodes, status)
    with contextlib.closing(sqlite3.connect(served.data_dir / "hayata.db", timeout=5)) as db:
        return int(db.execute(query, args).fetchone()[0])


def _middle_tasks(served: Served, status: str | None = None) -> int:
    return _tasks(served, ("middle",), status)


def _waiting(http: httpx.Client, thread: str, run: str) -> dict[str, Any] | None:
    """The run once it ended asking about an uncertain task (its ``hayata`` field)."""
    got: dict[str, Any] = http.get(f"/threads/{thread}/runs/{run}").json()
    return got if got["status"] == "success" and "hayata" in got else None


def _refused(http: httpx.Client, path: str, status: int, field: str, **body: Any) -> str:
    answer = http.post(path, json=body) if body else http.post(path)
    assert answer.status_code == status, answer.text
    detail: str = answer.json()["detail"]
    assert detail.startswith(f"{field}"), detail
    return detail


def test_resolve_and_abandon_after_a_whole_host_kill(served: Served) -> None:
    with get_sync_client(url=served.url, timeout=30.0) as client:
        threads = {label: client.threads.create()["thread_id"] for label in ("r", "a")}
        runs = {label: client.runs.create(thread, STEPS, input={"label": label, "delay": 30.0}
                                          )["run_id"] for label, thread in threads.items()}
        gate, effects = served.workdir / "gate", served.workdir / "effects"
        threads["f"] = client.threads.create()["thread_id"]
        runs["f"] = client.runs.create(threads["f"], FANOUT, input={
            "gate": str(gate), "effects": str(effects), "steps": []})["run_id"]
        wait_until(lambda: _middle_tasks(served, "started") == 2, "both middle nodes in flight")
        wait_until(lambda: _tasks(served, ("left", "right"), "started") == 2,
                   "left and right in flight")
        # their functions run (each notes its start), not only their starts recorded
        wait_until(lambda: effects.exists() and sorted(effects.read_text().split())
                   == ["left", "right"], "left and right running")
        seen = []
        for part in client.runs.join_stream(threads["r"], runs["r"], last_event_id="-1"):
            seen.append(part)
            if part.event == "values" and part.data.get("steps") == ["r:first"]:
                break
    served.kill()  # the whole host: the server and its actor processes
    served.process.wait(timeout=30)
    served.process = start(served.workdir, served.data_dir, served.log,
                           port=served.port).process
    with httpx.Client(base_url=served.url, timeout=30.0) as http:
        waiting = {label: wait_until(lambda label=label: _waiting(  # type: ignore[misc]
            http, threads[label], runs[label]), f"run {label} asking after the restart")
            for label in threads}
        thread, run = threads["r"], runs["r"]
        [task] = waiting["r"]["hayata"]["uncertain"]
        assert task["node"] == "middle"
        resolve = f"/hayata/threads/{thread}/tasks/{task['task_id']}/resolve"
        assert task["resolve"] == {"method": "POST", "path": resolve, "body": {
            "completed": "the node's return value (a JSON object), if it did its work",
            "rerun": "true: run the node again"}}
        assert waiting["r"]["hayata"]["abandon"] == {
            "method": "POST", "path": f"/hayata/threads/{thread}/abandon"}
        assert http.get(f"/threads/{thread}").json()["status"] == "interrupted"

        # refused at the boundary, nothing recorded
        _refused(http, resolve, 422, "completd", completd={"steps": ["x"]})
        _refused(http, resolve, 422, "completed")
        _refused(http, resolve, 422, "rerun", rerun=False)
        _refused(http, resolve, 422, "completed", completed="done")
        _refused(http, resolve, 422, "completed, rerun", completed={}, rerun=True)
        assert f"/hayata/threads/{thread}/abandon" in _refused(
            http, resolve, 422, "abandon", abandon=True)
        _refused(http, f"/hayata/threads/{uuid.uuid4()}/tasks/{task['task_id']}/resolve",
                 404, "Thread", completed={})
        _refused(http, f"/hayata/threads/{thread}/tasks/{uuid.uuid4()}/resolve", 404,
                 "thread", completed={})
        _refused(http, f"/hayata/threads/{thread}/abandon", 422, "reason", reason="x")
        assert _waiting(http, thread, run) is not None
        middles = _middle_tasks(served)

        # resolve: the same run goes on with the node's update, its stream ends normally
        answer = http.post(resolve, json={"completed": {"steps": ["r:by-hand"]}})
        assert answer.status_code == 200, answer.text
        done = answer.json()
        assert done["uncertain"] == [] and done["run"]["run_id"] == run
        assert done["run"]["status"] in ("pending", "running", "success")
        assert answer.headers["content-location"] == f"/threads/{thread}/runs/{run}"
    with get_sync_client(url=served.url, timeout=30.0) as client:
        rest = list(client.runs.join_stream(thread, run, last_event_id=seen[-1].id))
        whole = list(client.runs.join_stream(thread, run, last_event_id="-1"))
        assert [(p.id, p.event, p.data) for p in seen + rest] == [
            (p.id, p.event, p.data) for p in whole]
        assert [p.event for p in whole].count("metadata") == 1
        assert rest[-1].event == "values", [p.event for p in rest]
        assert rest[-1].data["steps"] == ["r:first", "r:by-hand", "r:last"]
        assert client.runs.get(thread, run)["status"] == "success"
        assert "hayata" not in client.runs.get(thread, run)
        assert client.threads.get(thread)["status"] == "idle"
        state: Any = client.threads.get_state(thread)
        assert state["values"]["steps"] == ["r:first", "r:by-hand", "r:last"]
    assert _middle_tasks(served) == middles, "the resolved node ran again"
    with httpx.Client(base_url=served.url, timeout=30.0) as http:
        again = _refused(http, resolve, 409, "task", completed={"steps": []})
        assert "not uncertain" in again

        # abandon: the other run ends error, its thread error; its progress is kept,
        # and the thread's next run starts from it
        thread, run = threads["a"], runs["a"]
        gone = http.post(f"/hayata/threads/{thread}/abandon")
        assert gone.status_code == 200, gone.text
        assert gone.json()["run"]["status"] == "error"
        assert http.get(f"/threads/{thread}/runs/{run}").json()["status"] == "error"
        assert http.get(f"/threads/{thread}").json()["status"] == "error"
        assert http.get(f"/threads/{thread}/state").json()["values"]["steps"] == ["a:first"]
        _refused(http, f"/hayata/threads/{thread}/abandon", 409, "thread")
    with get_sync_client(url=served.url, timeout=30.0) as client:
        log = list(client.runs.join_stream(thread, run, last_event_id="-1"))
        assert log[-1].event == "error" and log[-1].data["error"] == "Abandoned", log[-1]
        assert "hayata" not in client.runs.get(thread, run)
        next_run: Any = client.runs.wait(thread, STEPS, input={"label": "b", "delay": 0.0})
        assert next_run["steps"] == ["a:first", "b:first", "b:middle", "b:last"]
        assert client.threads.get(thread)["status"] == "idle"

    # two parallel nodes uncertain: the run goes on once both are answered
    thread, run = threads["f"], runs["f"]
    tasks = {t["node"]: t for t in waiting["f"]["hayata"]["uncertain"]}
    assert set(tasks) == {"left", "right"}
    gate.write_text("open")  # a re-run of right ends at once
    with httpx.Client(base_url=served.url, timeout=30.0) as http:
        first = http.post(tasks["left"]["resolve"]["path"],
                          json={"completed": {"steps": ["left:by-hand"]}})
        assert first.status_code == 200, first.text
        assert first.json()["run"] is None
        assert [t["node"] for t in first.json()["uncertain"]] == ["right"]
        still = _waiting(http, thread, run)
        assert still is not None
        assert [t["node"] for t in still["hayata"]["uncertain"]] == ["right"]
        second = http.post(tasks["right"]["resolve"]["path"], json={"rerun": True})
        assert second.status_code == 200, second.text
        assert second.json()["run"]["run_id"] == run
    with get_sync_client(url=served.url, timeout=30.0) as client:
        done = client.runs.join(thread, run)
        assert sorted(done["steps"]) == ["join", "left:by-hand", "right"], done
        assert client.runs.get(thread, run)["status"] == "success"
    assert sorted(effects.read_text().split()) == ["left", "right", "right"]
