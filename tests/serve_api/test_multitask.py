"""A second run on a busy thread: ``reject`` and ``enqueue``."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.serve_api.support import STEPS, wait_until

pytestmark = pytest.mark.timeout(60)


def test_reject_on_a_busy_thread_is_409(client: SyncLangGraphClient, thread_id: str) -> None:
    """``multitask_strategy="reject"`` on a busy thread is a 409; the running run goes on."""
    first = client.runs.create(thread_id, STEPS, input={"label": "a", "delay": 30.0})
    wait_until(lambda: client.runs.get(thread_id, first["run_id"])["status"] == "running",
               "first run running")
    with pytest.raises(ConflictError):
        client.runs.create(thread_id, STEPS, input={"label": "b"}, multitask_strategy="reject")
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [first["run_id"]]
    assert client.runs.get(thread_id, first["run_id"])["status"] == "running"


def test_reject_on_an_idle_thread_runs(client: SyncLangGraphClient, thread_id: str) -> None:
    """``reject`` only refuses a busy thread: on an idle one the run runs."""
    values = client.runs.wait(thread_id, STEPS, input={"label": "r"}, multitask_strategy="reject")
    assert values["steps"] == ["r:first", "r:middle", "r:last"]


def test_enqueue_runs_after_the_running_one(client: SyncLangGraphClient, thread_id: str) -> None:
    """An enqueued run stays ``pending`` until the one before it ends, then runs on its state."""
    first = client.runs.create(thread_id, STEPS, input={"label": "a", "delay": 2.0})
    second = client.runs.create(thread_id, STEPS, input={"label": "b"},
                                multitask_strategy="enqueue")
    wait_until(lambda: client.runs.get(thread_id, first["run_id"])["status"] == "running",
               "first run running")
    assert client.runs.get(thread_id, second["run_id"])["status"] == "pending"
    client.runs.join(thread_id, second["run_id"])
    assert client.runs.get(thread_id, first["run_id"])["status"] == "success"
    assert client.threads.get_state(thread_id)["values"]["steps"] == [
        "a:first", "a:middle", "a:last", "b:first", "b:middle", "b:last"]


def test_interrupt_stops_the_running_run(client: SyncLangGraphClient, thread_id: str) -> None:
    """``interrupt``: the running run ends ``interrupted``, keeps its writes; the new one runs."""
    first = client.runs.create(thread_id, STEPS, input={"label": "a", "delay": 30.0})
    wait_until(lambda: client.threads.get_state(thread_id)["values"].get("steps") == ["a:first"],
               "first run in its middle node")
    second = client.runs.create(thread_id, STEPS, input={"label": "b"},
                                multitask_strategy="interrupt")
    client.runs.join(thread_id, second["run_id"])
    assert client.runs.get(thread_id, first["run_id"])["status"] == "interrupted"
    assert client.runs.get(thread_id, second["run_id"])["status"] == "success"
    assert client.threads.get_state(thread_id)["values"]["steps"] == [
        "a:first", "b:first", "b:middle", "b:last"]


def test_rollback_deletes_the_running_run(client: SyncLangGraphClient, thread_id: str) -> None:
    """``rollback``: the running run and its writes are gone (404); the new one runs alone."""
    first = client.runs.create(thread_id, STEPS, input={"label": "a", "delay": 30.0})
    wait_until(lambda: client.threads.get_state(thread_id)["values"].get("steps") == ["a:first"],
               "first run in its middle node")
    second = client.runs.create(thread_id, STEPS, input={"label": "b"},
                                multitask_strategy="rollback")
    client.runs.join(thread_id, second["run_id"])
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, first["run_id"])
    assert client.threads.get_state(thread_id)["values"]["steps"] == [
        "b:first", "b:middle", "b:last"]
