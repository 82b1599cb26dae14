"""examples/sse_app.py served by a real uvicorn on loopback: each request
starts an agent run and gets its events as server-sent events."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.helpers import eventually


@pytest.fixture
def slow_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in LLM takes 50 ms a token: a run outlives a reconnect."""
    monkeypatch.setenv("HAYATA_SSE_TOKEN_DELAY", "0.05")
    import examples.sse_app

    monkeypatch.setattr(examples.sse_app, "TOKEN_DELAY", 0.05)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("HAYATA_DATA", str(tmp_path / "data"))
    from examples.sse_app import app

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                            lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    eventually(lambda: server.started, timeout=60, message="uvicorn started")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        assert not thread.is_alive(), "the app did not shut down"


Event = tuple[str, int | None, Any]


def read_events(url: str, question: str) -> list[Event]:
    return read_stream(url, "/ask", {"q": question})


def read_stream(url: str, path: str, params: dict[str, str] | None = None,
                headers: dict[str, str] | None = None, stop_after: int | None = None
                ) -> list[Event]:
    """Read server-sent events as a browser's EventSource does (``stop_after``:
    drop the connection after that many events, as a page reload does)."""
    events: list[Event] = []
    with httpx.Client(timeout=60) as client, client.stream(
            "GET", f"{url}{path}", params=params, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            ident = int(fields["id"]) if "id" in fields else None
            events.append((fields["event"], ident, json.loads(fields["data"])))
            fields = {}
            if stop_after is not None and len(events) >= stop_after:
                break
    return events


def test_each_request_streams_its_run_as_server_sent_events(server: str) -> None:
    questions = [f"question {n}" for n in range(4)]
    with ThreadPoolExecutor(len(questions)) as pool:  # more requests than agents
        streams = list(pool.map(lambda q: read_events(server, q), questions))
    for question, events in zip(questions, streams, strict=True):
        kinds = [kind for kind, _, _ in events]
        words = f"an answer to {question!r}".split()
        assert events[0] == ("run", None, {"invocation_id": events[-1][2]["invocation_id"],
                                           "events": f"/runs/{events[-1][2]['invocation_id']}"
                                                     "/events"})
        events = events[1:]
        kinds = kinds[1:]
        assert kinds == ["invocation_started", "node_started"] + [
            "node_partial_result"] * len(words) + [
            "node_completed", "invocation_completed", "result"]
        assert [ident for _, ident, _ in events[:-1]] == list(range(1, len(events)))
        tokens = [data["result"]["token"] for kind, _, data in events
                  if kind == "node_partial_result"]
        assert tokens == words
        result = events[-1][2]
        assert result["ok"] and result["result"] == {"answer": " ".join(words)}
    invocations = {events[-1][2]["invocation_id"] for events in streams}
    assert len(invocations) == len(questions)


def test_a_request_without_a_question_is_refused(server: str) -> None:
    response = httpx.get(f"{server}/ask", timeout=30)
    assert response.status_code == 400
    assert response.json() == {"error": "missing query parameter q"}


def test_a_reconnecting_client_with_last_event_id_misses_nothing_and_sees_nothing_twice(
        slow_tokens: None, server: str) -> None:
    """A browser reads part of a run's stream, loses the connection (a reload),
    and reconnects to /runs/<id>/events with the last id it saw as
    Last-Event-ID: it gets the rest from the durable log, then the live events,
    then the result; together: every sequence once, in order."""
    first = read_stream(server, "/ask", {"q": "a long question"}, stop_after=4)
    assert first[0][0] == "run"
    invocation, path = first[0][2]["invocation_id"], first[0][2]["events"]
    seen = [ident for _, ident, _ in first[1:]]
    assert seen == [1, 2, 3]
    rest = read_stream(server, path, headers={"Last-Event-ID": str(seen[-1])})
    assert rest[-1][0] == "result" and rest[-1][2]["ok"]
    assert rest[-1][2]["invocation_id"] == invocation
    sequences = seen + [ident for _, ident, _ in rest[:-1]]
    assert sequences == list(range(1, len(sequences) + 1))
    kinds = [kind for kind, _, _ in first[1:] + rest[:-1]]
    words = ["an", "answer", "to", "'a", "long", "question'"]
    assert kinds == ["invocation_started", "node_started"] + [
        "node_partial_result"] * len(words) + ["node_completed", "invocation_completed"]
    # The same from the start with ?after=0, and a bad id or an unknown run is refused.
    again = read_stream(server, path, params={"after": "0"})
    assert [ident for _, ident, _ in again[:-1]] == sequences
    bad = httpx.get(f"{server}{path}", headers={"Last-Event-ID": "x"}, timeout=30)
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]
    unknown = httpx.get(f"{server}/runs/nope/events", timeout=30)
    assert unknown.status_code == 404
