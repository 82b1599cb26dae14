"""Runs on a thread: create, get, list, join, wait, cancel."""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError
from langgraph_sdk.schema import RunCreateMetadata

from tests.serve_api.conftest import forget_thread
from tests.serve_api.support import STEPS, TERMINAL, await_until, run_async, wait_until

pytestmark = pytest.mark.timeout(60)

#: Long enough that a run is still in its middle node when the test acts on it.
BUSY = 30.0


def running(client: SyncLangGraphClient, thread_id: str, run_id: str) -> None:
    """Wait until the run is ``running``."""
    wait_until(lambda: client.runs.get(thread_id, run_id)["status"] == "running", "run running")


def test_create_defaults_to_enqueue(client: SyncLangGraphClient, thread_id: str) -> None:
    """``POST /threads/{t}/runs`` answers a ``pending`` run; ``multitask_strategy`` ``enqueue``."""
    run = client.runs.create(thread_id, STEPS, input={"label": "c"})
    assert run["status"] == "pending"
    assert run["multitask_strategy"] == "enqueue"
    assert run["thread_id"] == thread_id
    client.runs.join(thread_id, run["run_id"])


def test_create_names_the_run_in_content_location(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """The create answer's ``Content-Location`` names ``/threads/{t}/runs/{r}`` (on_run_created)."""
    seen: list[RunCreateMetadata] = []
    run = client.runs.create(thread_id, STEPS, input={"label": "c"}, on_run_created=seen.append)
    assert seen == [{"run_id": run["run_id"], "thread_id": thread_id}]
    client.runs.join(thread_id, run["run_id"])


def test_background_run_ends_success_thread_idle(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """A background run goes on to ``success`` and leaves its thread ``idle`` with the values."""
    run = client.runs.create(thread_id, STEPS, input={"label": "b"})
    wait_until(lambda: client.runs.get(thread_id, run["run_id"])["status"] in TERMINAL, "run ends")
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
    thread = client.threads.get(thread_id)
    assert thread["status"] == "idle"
    assert thread["values"] == {"label": "b", "steps": ["b:first", "b:middle", "b:last"]}


def test_thread_is_busy_while_a_run_runs(client: SyncLangGraphClient, thread_id: str) -> None:
    """While a run runs its thread is ``busy``."""
    run = client.runs.create(thread_id, STEPS, input={"label": "b", "delay": BUSY})
    running(client, thread_id, run["run_id"])
    assert client.threads.get(thread_id)["status"] == "busy"


def test_join_answers_the_final_values(client: SyncLangGraphClient, thread_id: str) -> None:
    """``GET /threads/{t}/runs/{r}/join`` waits for the run and answers the thread's values."""
    run = client.runs.create(thread_id, STEPS, input={"label": "j"})
    assert client.runs.join(thread_id, run["run_id"]) == {
        "label": "j", "steps": ["j:first", "j:middle", "j:last"]}
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"


def test_wait_answers_the_final_values(client: SyncLangGraphClient, thread_id: str) -> None:
    """``POST /threads/{t}/runs/wait`` runs to the end and answers the values."""
    values = client.runs.wait(thread_id, STEPS, input={"label": "w"})
    assert values == {"label": "w", "steps": ["w:first", "w:middle", "w:last"]}


def test_get_answers_the_run(client: SyncLangGraphClient, thread_id: str) -> None:
    """``GET /threads/{t}/runs/{r}`` answers the run with its ids and status."""
    run = client.runs.create(thread_id, STEPS, input={"label": "g"})
    client.runs.join(thread_id, run["run_id"])
    got = client.runs.get(thread_id, run["run_id"])
    assert (got["run_id"], got["thread_id"], got["status"]) == (run["run_id"], thread_id, "success")


def test_get_unknown_run_is_404(client: SyncLangGraphClient, thread_id: str) -> None:
    """``GET /threads/{t}/runs/{unknown}`` is a 404."""
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, str(uuid.uuid4()))


def test_list_is_newest_first(client: SyncLangGraphClient, thread_id: str) -> None:
    """``GET /threads/{t}/runs`` lists the thread's runs newest first; ``limit`` cuts it."""
    first = client.runs.create(thread_id, STEPS, input={"label": "1"})
    second = client.runs.create(thread_id, STEPS, input={"label": "2"})
    client.runs.join(thread_id, second["run_id"])
    listed = client.runs.list(thread_id)
    assert [r["run_id"] for r in listed] == [second["run_id"], first["run_id"]]
    assert [r["run_id"] for r in client.runs.list(thread_id, limit=1)] == [second["run_id"]]


def test_list_filters_by_status(client: SyncLangGraphClient, thread_id: str) -> None:
    """``status`` keeps the runs of that status."""
    done = client.runs.create(thread_id, STEPS, input={"label": "d"})
    client.runs.join(thread_id, done["run_id"])
    busy = client.runs.create(thread_id, STEPS, input={"label": "b", "delay": BUSY})
    running(client, thread_id, busy["run_id"])
    assert [r["run_id"] for r in client.runs.list(thread_id, status="running")] == [busy["run_id"]]
    assert [r["run_id"] for r in client.runs.list(thread_id, status="success")] == [done["run_id"]]


def test_cancel_leaves_run_and_thread_interrupted(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """``POST .../cancel`` (202) stops the run: run and thread ``interrupted``, state kept."""
    run = client.runs.create(thread_id, STEPS, input={"label": "x", "delay": BUSY})
    wait_until(lambda: client.threads.get_state(thread_id)["values"].get("steps") == ["x:first"],
               "the run waiting in its middle node")
    client.runs.cancel(thread_id, run["run_id"])
    wait_until(lambda: client.runs.get(thread_id, run["run_id"])["status"] == "interrupted",
               "run interrupted")
    wait_until(lambda: client.threads.get(thread_id)["status"] == "interrupted",
               "thread interrupted")
    assert client.threads.get_state(thread_id)["values"]["steps"] == ["x:first"]


def test_cancel_wait_returns_once_stopped(client: SyncLangGraphClient, thread_id: str) -> None:
    """``cancel?wait=1`` answers once the run has stopped (already ``interrupted``)."""
    run = client.runs.create(thread_id, STEPS, input={"label": "x", "delay": BUSY})
    running(client, thread_id, run["run_id"])
    client.runs.cancel(thread_id, run["run_id"], wait=True)
    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"


def deleted(client: SyncLangGraphClient, thread_id: str, run_id: str) -> bool:
    """Whether the thread's run is gone (a 404)."""
    try:
        client.runs.get(thread_id, run_id)
    except NotFoundError:
        return True
    return False


def test_cancel_rollback_deletes_the_run(client: SyncLangGraphClient, thread_id: str) -> None:
    """``action=rollback`` stops the run and deletes it: the run is a 404, the thread ``idle``."""
    run = client.runs.create(thread_id, STEPS, input={"label": "x", "delay": BUSY})
    running(client, thread_id, run["run_id"])
    client.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
    wait_until(lambda: deleted(client, thread_id, run["run_id"]), "rolled-back run deleted")
    assert client.threads.get(thread_id)["status"] == "idle"


def test_cancel_rollback_without_waiting_deletes_the_run(client: SyncLangGraphClient,
                                                         thread_id: str) -> None:
    """``action=rollback`` without ``wait``: the run is deleted all the same, and the
    thread holds none of its writes."""
    before = client.runs.wait(thread_id, STEPS, input={"label": "a"})
    run = client.runs.create(thread_id, STEPS, input={"label": "x", "delay": BUSY})
    running(client, thread_id, run["run_id"])
    client.runs.cancel(thread_id, run["run_id"], action="rollback")
    wait_until(lambda: deleted(client, thread_id, run["run_id"]), "rolled-back run deleted")
    # (the thread's status is left out: LangGraph's server leaves it "busy")
    assert client.threads.get_state(thread_id)["values"]["steps"] == before["steps"]


def test_cancel_unknown_run_is_404(client: SyncLangGraphClient, thread_id: str) -> None:
    """Cancelling a run the thread does not have is a 404."""
    with pytest.raises(NotFoundError):
        client.runs.cancel(thread_id, str(uuid.uuid4()))


def test_run_on_unknown_thread_is_404(client: SyncLangGraphClient) -> None:
    """A run on a thread that does not exist is a 404 (``if_not_exists`` defaults to reject)."""
    with pytest.raises(NotFoundError):
        client.runs.create(str(uuid.uuid4()), STEPS, input={})


def test_if_not_exists_create(client: SyncLangGraphClient) -> None:
    """``if_not_exists="create"`` makes the missing thread under the given id and runs on it."""
    thread_id = str(uuid.uuid4())
    try:
        values = client.runs.wait(thread_id, STEPS, input={"label": "n"}, if_not_exists="create")
        assert values["steps"] == ["n:first", "n:middle", "n:last"]
        assert client.threads.get(thread_id)["status"] == "idle"
    finally:
        forget_thread(client, thread_id)


def test_async_create_join_cancel(server_url: str) -> None:
    """The async client creates, joins and cancels runs the same way."""

    async def drive(client: LangGraphClient) -> tuple[object, str, str]:
        thread_id = (await client.threads.create())["thread_id"]
        try:
            done = await client.runs.create(thread_id, STEPS, input={"label": "a"})
            values = await client.runs.join(thread_id, done["run_id"])
            busy = await client.runs.create(thread_id, STEPS, input={"label": "b", "delay": BUSY})

            async def started() -> bool:
                run = await client.runs.get(thread_id, busy["run_id"])
                return bool(run["status"] == "running")

            await await_until(started, "run running")
            await client.runs.cancel(thread_id, busy["run_id"], wait=True)
            run = await client.runs.get(thread_id, busy["run_id"])
            thread = await client.threads.get(thread_id)
            return values, run["status"], thread["status"]
        finally:
            await client.threads.delete(thread_id)

    values, run_status, thread_status = run_async(server_url, drive)
    assert values == {"label": "a", "steps": ["a:first", "a:middle", "a:last"]}
    assert (run_status, thread_status) == ("interrupted", "interrupted")


def test_wait_names_the_run_and_its_join(client: SyncLangGraphClient, thread_id: str) -> None:
    """``runs/wait`` answers ``Content-Location`` (the run) and ``Location`` (its ``/join``)."""
    response = client.http.client.post(f"/threads/{thread_id}/runs/wait",
                                       json={"assistant_id": STEPS, "input": {"label": "l"}})
    assert response.status_code == 200
    run_path = response.headers["content-location"]
    assert run_path.startswith(f"/threads/{thread_id}/runs/")
    assert response.headers["location"] == f"{run_path}/join"
    assert response.json()["steps"] == ["l:first", "l:middle", "l:last"]
