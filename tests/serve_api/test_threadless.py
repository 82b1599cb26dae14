"""Runs without a thread: ``POST /runs``, ``/runs/stream``, ``/runs/wait``."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError
from langgraph_sdk.schema import RunCreateMetadata

from tests.serve_api.conftest import forget_thread
from tests.serve_api.support import STEPS, names, of, run_async, wait_until

pytestmark = pytest.mark.timeout(60)

DONE = {"label": "t", "steps": ["t:first", "t:middle", "t:last"]}


def test_wait(client: SyncLangGraphClient) -> None:
    """``POST /runs/wait`` runs on a temporary thread and answers the final values."""
    seen: list[RunCreateMetadata] = []
    assert client.runs.wait(None, STEPS, input={"label": "t"}, on_run_created=seen.append) == DONE
    [created] = seen
    assert created["run_id"] and created["thread_id"]
    forget_thread(client, str(created["thread_id"]))


def test_stream(client: SyncLangGraphClient) -> None:
    """``POST /runs/stream`` streams metadata then the values to the final state."""
    parts = list(client.runs.stream(None, STEPS, input={"label": "t"}, stream_mode="values"))
    assert names(parts) == ["metadata"] + ["values"] * 4
    assert of(parts, "values")[-1] == DONE


def test_create_then_join(client: SyncLangGraphClient) -> None:
    """``POST /runs`` answers a ``pending`` run with its thread; ``on_completion=keep`` keeps it."""
    run = client.runs.create(None, STEPS, input={"label": "t"}, on_completion="keep")
    try:
        assert run["status"] == "pending"
        assert client.runs.join(run["thread_id"], run["run_id"]) == DONE
        assert client.runs.get(run["thread_id"], run["run_id"])["status"] == "success"
        assert client.threads.get(run["thread_id"])["values"] == DONE
    finally:
        forget_thread(client, run["thread_id"])


def test_thread_deleted_when_done_by_default(client: SyncLangGraphClient) -> None:
    """A thread-less run's thread is deleted once the run is done (``on_completion`` delete)."""
    run = client.runs.create(None, STEPS, input={"label": "t"})

    def thread_gone() -> bool:
        try:
            client.threads.get(run["thread_id"])
        except NotFoundError:
            return True
        return False

    wait_until(thread_gone, "the temporary thread deleted")


def test_async_wait(server_url: str) -> None:
    """The async client's thread-less ``wait`` answers the same values."""

    async def body(client: LangGraphClient) -> object:
        return await client.runs.wait(None, STEPS, input={"label": "t"})

    assert run_async(server_url, body) == DONE
