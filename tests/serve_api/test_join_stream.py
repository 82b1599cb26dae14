"""``GET /threads/{t}/runs/{r}/stream``: joining a run's stream, resumed by ``Last-Event-ID``."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient
from langgraph_sdk.schema import StreamPart

from tests.serve_api.support import STEPS, body, names, run_async, wait_until

pytestmark = pytest.mark.timeout(60)

MODES = ["values", "updates"]


def streamed(client: SyncLangGraphClient, thread_id: str, label: str) -> list[StreamPart]:
    """A finished resumable run's whole stream."""
    return list(client.runs.stream(thread_id, STEPS, input={"label": label}, stream_mode=MODES,
                                   stream_resumable=True))


def resume_point(parts: list[StreamPart]) -> int:
    """The index of an event in the middle of the stream whose id no other event shares.

    LangGraph's server numbers events ``<ms>-0``, so events of one millisecond
    share an id and a resume from it skips its twins (see
    benchmarks/results/serve/langgraph-dev-observations.md); resuming after a
    unique id tests the replay itself."""
    ids = [part.id for part in parts]
    assert all(ids), f"events without an id: {ids}"
    for k in range(1, len(parts) - 1):
        if ids.count(ids[k]) == 1:
            return k
    raise AssertionError(f"no event id of its own in the stream: {ids}")


def same(parts: list[StreamPart]) -> list[tuple[str, object]]:
    """What a replay must repeat: each event's name and payload (a closing ``end`` left out)."""
    return [(part.event, part.data) for part in body(parts)]


def test_replay_after_an_event_id(client: SyncLangGraphClient, thread_id: str) -> None:
    """``Last-Event-ID`` of an event replays exactly the events after it, then closes."""
    full = streamed(client, thread_id, "j")
    run_id = full[0].data["run_id"]
    k = resume_point(full)
    tail = list(client.runs.join_stream(thread_id, run_id, last_event_id=full[k].id))
    assert same(tail) == same(full[k + 1:])


def test_replay_from_minus_one(client: SyncLangGraphClient, thread_id: str) -> None:
    """``Last-Event-ID: -1`` replays the whole stream, metadata first."""
    full = streamed(client, thread_id, "a")
    replay = list(client.runs.join_stream(thread_id, full[0].data["run_id"], last_event_id="-1"))
    assert same(replay) == same(full)


def test_join_a_running_run_follows_to_the_end(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """Joining a running run from ``-1`` gives every event to its end; the run is then done."""
    run = client.runs.create(thread_id, STEPS, input={"label": "f", "delay": 1.0},
                             stream_mode=MODES, stream_resumable=True)
    wait_until(lambda: client.runs.get(thread_id, run["run_id"])["status"] == "running",
               "run running")
    parts = list(client.runs.join_stream(thread_id, run["run_id"], last_event_id="-1"))
    assert names(parts) == ["metadata", "values"] + ["updates", "values"] * 3
    assert body(parts)[-1].data == {"label": "f", "delay": 1.0,
                              "steps": ["f:first", "f:middle", "f:last"]}
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"


def test_join_stream_mode_filters(client: SyncLangGraphClient, thread_id: str) -> None:
    """``stream_mode`` on the join keeps only those modes of the run's stream."""
    full = streamed(client, thread_id, "u")
    updates = list(client.runs.join_stream(thread_id, full[0].data["run_id"],
                                           stream_mode="updates", last_event_id="-1"))
    assert same(updates) == [(p.event, p.data) for p in full if p.event == "updates"]
    assert updates, "the run's stream had updates"


def test_async_join_stream(server_url: str, client: SyncLangGraphClient, thread_id: str) -> None:
    """The async client's ``join_stream`` resumes from an event id the same way."""
    full = streamed(client, thread_id, "s")
    run_id = full[0].data["run_id"]
    k = resume_point(full)

    async def join(aclient: LangGraphClient) -> list[StreamPart]:
        return [part async for part in aclient.runs.join_stream(
            thread_id, run_id, last_event_id=full[k].id)]

    assert same(run_async(server_url, join)) == same(full[k + 1:])
