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


def read_events(url: str, question: str) -> list[tuple[str, int | None, Any]]:
    events: list[tuple[str, int | None, Any]] = []
    with httpx.Client(timeout=60) as client, client.stream(
            "GET", f"{url}/ask", params={"q": question}) as response:
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
    return events


def test_each_request_streams_its_run_as_server_sent_events(server: str) -> None:
    questions = [f"question {n}" for n in range(4)]
    with ThreadPoolExecutor(len(questions)) as pool:  # more requests than agents
        streams = list(pool.map(lambda q: read_events(server, q), questions))
    for question, events in zip(questions, streams, strict=True):
        kinds = [kind for kind, _, _ in events]
        words = f"an answer to {question!r}".split()
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
