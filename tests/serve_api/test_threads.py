"""Threads: create, get, patch, delete, search."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import Thread

from tests.serve_api.support import STEPS, assistant_id_of, run_async

pytestmark = pytest.mark.timeout(60)

NewThread = Callable[..., Thread]


def test_create_answers_an_idle_thread(new_thread: NewThread) -> None:
    """``POST /threads`` answers a new thread: uuid id, ``idle``, its metadata, ``values`` null."""
    thread = new_thread(metadata={"owner": "conformance"})
    assert uuid.UUID(thread["thread_id"])
    assert thread["status"] == "idle"
    assert thread["metadata"] == {"owner": "conformance"}
    assert thread["values"] is None


def test_create_with_a_given_id(new_thread: NewThread) -> None:
    """``POST /threads`` with ``thread_id`` makes the thread under that id."""
    wanted = str(uuid.uuid4())
    assert new_thread(thread_id=wanted)["thread_id"] == wanted


def test_create_existing_id_is_409(new_thread: NewThread, client: SyncLangGraphClient) -> None:
    """Creating an existing thread id is a 409 (``if_exists`` defaults to ``raise``)."""
    thread_id = new_thread()["thread_id"]
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=thread_id)
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=thread_id, if_exists="raise")


def test_create_existing_id_do_nothing(new_thread: NewThread, client: SyncLangGraphClient) -> None:
    """``if_exists="do_nothing"`` answers the existing thread unchanged (new metadata ignored)."""
    thread_id = new_thread(metadata={"first": 1})["thread_id"]
    again = client.threads.create(thread_id=thread_id, if_exists="do_nothing", metadata={"x": 2})
    assert again["thread_id"] == thread_id
    assert again["metadata"] == {"first": 1}


def test_get(new_thread: NewThread, client: SyncLangGraphClient) -> None:
    """``GET /threads/{t}`` answers the thread as created."""
    thread = new_thread(metadata={"k": "v"})
    got = client.threads.get(thread["thread_id"])
    assert got["thread_id"] == thread["thread_id"]
    assert got["metadata"] == {"k": "v"}
    assert got["status"] == "idle"


def test_get_unknown_is_404(client: SyncLangGraphClient) -> None:
    """``GET /threads/{unknown uuid}`` is a 404."""
    with pytest.raises(NotFoundError):
        client.threads.get(str(uuid.uuid4()))


def test_get_malformed_id_is_422(client: SyncLangGraphClient) -> None:
    """``GET /threads/{not a uuid}`` is a 422."""
    with pytest.raises(UnprocessableEntityError):
        client.threads.get("not-a-uuid")


def test_patch_merges_metadata(new_thread: NewThread, client: SyncLangGraphClient) -> None:
    """``PATCH /threads/{t}`` merges the new metadata keys into the old."""
    thread_id = new_thread(metadata={"a": 1})["thread_id"]
    patched = client.threads.update(thread_id, metadata={"b": 2})
    assert patched["metadata"] == {"a": 1, "b": 2}
    assert client.threads.get(thread_id)["metadata"] == {"a": 1, "b": 2}


def test_patch_unknown_is_404(client: SyncLangGraphClient) -> None:
    """``PATCH /threads/{unknown}`` is a 404."""
    with pytest.raises(NotFoundError):
        client.threads.update(str(uuid.uuid4()), metadata={"a": 1})


def test_delete(new_thread: NewThread, client: SyncLangGraphClient) -> None:
    """``DELETE /threads/{t}`` removes it: a later get or delete is a 404."""
    thread_id = new_thread()["thread_id"]
    client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        client.threads.get(thread_id)
    with pytest.raises(NotFoundError):
        client.threads.delete(thread_id)


def test_search_by_metadata(new_thread: NewThread, client: SyncLangGraphClient) -> None:
    """``POST /threads/search`` with ``metadata`` finds exactly the threads carrying it."""
    tag = str(uuid.uuid4())
    mine = {new_thread(metadata={"tag": tag})["thread_id"] for _ in range(2)}
    new_thread(metadata={"tag": "other"})
    found = client.threads.search(metadata={"tag": tag}, limit=10)
    assert {t["thread_id"] for t in found} == mine


def test_search_by_status(new_thread: NewThread, client: SyncLangGraphClient) -> None:
    """``status`` in the search body keeps threads of that status."""
    tag = str(uuid.uuid4())
    thread_id = new_thread(metadata={"tag": tag})["thread_id"]
    assert [t["thread_id"] for t in client.threads.search(metadata={"tag": tag}, status="idle")] \
        == [thread_id]
    assert client.threads.search(metadata={"tag": tag}, status="busy") == []


def test_first_run_adds_graph_and_assistant_to_metadata(
    new_thread: NewThread, client: SyncLangGraphClient
) -> None:
    """A thread's metadata gains ``graph_id`` and ``assistant_id`` at its first run."""
    thread_id = new_thread(metadata={"mine": True})["thread_id"]
    client.runs.wait(thread_id, STEPS, input={"label": "m"})
    metadata = client.threads.get(thread_id)["metadata"]
    assert metadata == {"mine": True, "graph_id": STEPS, "assistant_id": assistant_id_of(STEPS)}


def test_async_thread_lifecycle(server_url: str) -> None:
    """The async client creates, patches, searches and deletes threads the same way."""
    tag = str(uuid.uuid4())

    async def drive(client: LangGraphClient) -> tuple[dict[str, Any], list[str], str]:
        thread = await client.threads.create(metadata={"tag": tag})
        patched = await client.threads.update(thread["thread_id"], metadata={"more": 1})
        found = [t["thread_id"] for t in await client.threads.search(metadata={"tag": tag})]
        await client.threads.delete(thread["thread_id"])
        try:
            await client.threads.get(thread["thread_id"])
        except NotFoundError:
            return dict(patched["metadata"]), found, thread["thread_id"]
        raise AssertionError("a deleted thread still answers")

    metadata, found, thread_id = run_async(server_url, drive)
    assert metadata == {"tag": tag, "more": 1}
    assert found == [thread_id]
