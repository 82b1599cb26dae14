"""``POST /threads/{t}/runs/stream``: event names and payload shapes per stream mode."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient
from langgraph_sdk.schema import RunCreateMetadata, StreamPart

from tests.serve_api.support import (
    CHAT,
    CHAT_REPLY,
    STEPS,
    TERMINAL,
    body,
    names,
    of,
    run_async,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)

HI = {"messages": [{"role": "user", "content": "hi"}]}


def stream(client: SyncLangGraphClient, thread_id: str, graph: str, graph_input: dict[str, Any],
           mode: str | list[str], **kwargs: Any) -> list[StreamPart]:
    parts = list(client.runs.stream(thread_id, graph, input=graph_input, stream_mode=mode,  # type: ignore[arg-type]
                                    **kwargs))
    assert parts, "an empty stream"
    return parts


def test_metadata_comes_first(client: SyncLangGraphClient, thread_id: str) -> None:
    """The first event is ``metadata`` ``{run_id, attempt}``; the run it names is this one."""
    seen: list[RunCreateMetadata] = []
    parts = stream(client, thread_id, STEPS, {"label": "m"}, "updates", on_run_created=seen.append)
    first = parts[0]
    assert first.event == "metadata"
    assert first.data["attempt"] == 1
    assert seen == [{"run_id": first.data["run_id"], "thread_id": thread_id}]
    assert "metadata" not in names(parts[1:])


def test_run_is_terminal_when_the_stream_closes(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """When the stream has closed the run is already ``success`` and the thread ``idle``."""
    parts = stream(client, thread_id, STEPS, {"label": "t"}, "values")
    assert client.runs.get(thread_id, parts[0].data["run_id"])["status"] == "success"
    assert client.threads.get(thread_id)["status"] == "idle"


def test_values_mode(client: SyncLangGraphClient, thread_id: str) -> None:
    """``values``: the whole state after the input and after each step, in order."""
    parts = stream(client, thread_id, STEPS, {"label": "v"}, "values")
    assert names(parts) == ["metadata"] + ["values"] * 4
    assert of(parts, "values") == [
        {"label": "v", "steps": []},
        {"label": "v", "steps": ["v:first"]},
        {"label": "v", "steps": ["v:first", "v:middle"]},
        {"label": "v", "steps": ["v:first", "v:middle", "v:last"]},
    ]


def test_updates_mode(client: SyncLangGraphClient, thread_id: str) -> None:
    """``updates``: ``{node: update}`` once per node, in order."""
    parts = stream(client, thread_id, STEPS, {"label": "u"}, "updates")
    assert names(parts) == ["metadata"] + ["updates"] * 3
    assert of(parts, "updates") == [
        {"first": {"steps": ["u:first"]}},
        {"middle": {"steps": ["u:middle"]}},
        {"last": {"steps": ["u:last"]}},
    ]


def test_messages_tuple_mode(client: SyncLangGraphClient, thread_id: str) -> None:
    """``messages-tuple``: events named ``messages``, ``[chunk, metadata]`` per token, one id."""
    parts = stream(client, thread_id, CHAT, HI, "messages-tuple")
    assert set(names(parts[1:])) == {"messages"}
    pairs = of(parts, "messages")
    chunks = [pair[0] for pair in pairs]  # type: ignore[index]
    assert {c["type"] for c in chunks} == {"AIMessageChunk"}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"]
    assert "".join(c["content"] for c in chunks) == CHAT_REPLY
    assert len(chunks) > 1, "the reply streams in more than one token"
    assert {pair[1]["langgraph_node"] for pair in pairs} == {"respond"}  # type: ignore[index]


def test_messages_mode_sends_the_message_so_far(client: SyncLangGraphClient,
                                                thread_id: str) -> None:
    """``messages``: ``messages/metadata`` once per message, then ``messages/partial``
    with the reply so far (a whole ``ai`` message, growing), one id throughout."""
    parts = stream(client, thread_id, CHAT, HI, "messages")
    kinds = names(parts[1:])
    assert kinds[0] == "messages/metadata" and set(kinds[1:]) == {"messages/partial"}
    assert len(kinds) > 2, "the reply streams in more than one part"
    (message_id, meta), = of(parts, "messages/metadata")[0].items()  # type: ignore[union-attr]
    assert meta["metadata"]["langgraph_node"] == "respond"
    sofar = [part[0] for part in of(parts, "messages/partial")]  # type: ignore[index]
    assert {m["type"] for m in sofar} == {"ai"} and {m["id"] for m in sofar} == {message_id}
    contents = [m["content"] for m in sofar]
    assert all(b.startswith(a) for a, b in itertools.pairwise(contents))
    assert contents[-1] == CHAT_REPLY


def test_messages_are_langchain_shaped(client: SyncLangGraphClient, thread_id: str) -> None:
    """The state's messages are LangChain-shaped: ``type`` human/ai, ``id``, ``content``."""
    parts = stream(client, thread_id, CHAT, HI, "values")
    final = of(parts, "values")[-1]
    assert isinstance(final, dict)
    human, ai = final["messages"]
    assert (human["type"], human["content"]) == ("human", "hi")
    assert (ai["type"], ai["content"]) == ("ai", CHAT_REPLY)
    assert human["id"] and ai["id"]
    assert ai["tool_calls"] == []


def test_custom_mode(client: SyncLangGraphClient, thread_id: str) -> None:
    """``custom``: what the node wrote with ``get_stream_writer()``, as written."""
    parts = stream(client, thread_id, CHAT, HI, "custom")
    assert names(parts) == ["metadata", "custom", "custom"]
    assert of(parts, "custom") == [{"progress": "thinking"}, {"progress": "done"}]


def test_debug_mode(client: SyncLangGraphClient, thread_id: str) -> None:
    """``debug``: ``{type, step, timestamp, payload}`` for checkpoints, tasks and task results."""
    parts = stream(client, thread_id, CHAT, HI, "debug")
    events = of(parts, "debug")
    assert all(isinstance(e, dict) and {"type", "step", "timestamp", "payload"} <= set(e)
               for e in events)
    kinds = [e["type"] for e in events]  # type: ignore[index]
    assert kinds == ["checkpoint", "checkpoint", "task", "task_result", "checkpoint"]
    result = events[3]
    assert isinstance(result, dict)
    assert result["payload"]["name"] == "respond"


def test_events_mode_steps(client: SyncLangGraphClient, thread_id: str) -> None:
    """``events``: LangChain's stream events (v2): the graph's chain, named by
    the graph id, with the run's id, then each node's start, output and end
    under it, then the graph's end with the final state."""
    parts = stream(client, thread_id, STEPS, {"label": "e"}, "events")
    run_id = parts[0].data["run_id"]
    events = of(parts, "events")
    assert names(parts) == ["metadata"] + ["events"] * len(events)
    assert all(isinstance(e, dict) for e in events)
    first, last, inner = events[0], events[-1], events[1:-1]
    assert isinstance(first, dict) and isinstance(last, dict)
    assert (first["event"], first["name"], first["run_id"], first["parent_ids"]) == (
        "on_chain_start", STEPS, run_id, [])
    assert first["data"] == {"input": {"label": "e"}}
    assert (last["event"], last["name"], last["run_id"]) == ("on_chain_end", STEPS, run_id)
    assert last["data"]["output"]["steps"] == ["e:first", "e:middle", "e:last"]
    assert [(e["event"], e["name"], e["tags"]) for e in inner] == [  # type: ignore[index]
        (kind, node, [f"graph:step:{step}"])
        for step, node in enumerate(("first", "middle", "last"), 1)
        for kind in ("on_chain_start", "on_chain_stream", "on_chain_end")]
    for event in inner:
        assert isinstance(event, dict)
        assert event["parent_ids"] == [run_id]
        assert event["metadata"]["langgraph_node"] == event["name"]
        assert event["metadata"]["langgraph_step"] == int(event["tags"][0].split(":")[-1])
    assert inner[1]["data"] == {"chunk": {"steps": ["e:first"]}}  # type: ignore[index]
    assert inner[2]["data"] == {"input": {"label": "e", "steps": []},  # type: ignore[index]
                                "output": {"steps": ["e:first"]}}


def test_events_mode_chat_model(client: SyncLangGraphClient, thread_id: str) -> None:
    """``events`` of a node calling a chat model: its ``on_chat_model_start``,
    a ``on_chat_model_stream`` per token (an ``AIMessageChunk``), its end,
    two levels under the graph's run; no ``custom`` events unless asked for."""
    parts = stream(client, thread_id, CHAT, HI, ["events", "custom"])
    run_id = parts[0].data["run_id"]
    events = [e for e in of(parts, "events") if isinstance(e, dict)]
    model = [e for e in events if e["event"].startswith("on_chat_model")]
    kinds = [e["event"] for e in model]
    assert kinds[0] == "on_chat_model_start" and kinds[-1] == "on_chat_model_end"
    assert set(kinds[1:-1]) == {"on_chat_model_stream"} and len(kinds) > 3
    text = "".join(e["data"]["chunk"]["content"] for e in model[1:-1])
    assert text == CHAT_REPLY
    assert all(e["data"]["chunk"]["type"] == "AIMessageChunk" for e in model[1:-1])
    node = next(e for e in events if e["name"] == "respond")
    assert all(e["parent_ids"] == [run_id, node["run_id"]] for e in model)
    assert all(e["metadata"]["langgraph_node"] == "respond" for e in model)
    assert [e["event"] for e in events if e["name"] == "respond"] == [
        "on_chain_start", "on_chain_stream", "on_chain_end"]
    assert events.index(node) < events.index(model[0])
    assert of(parts, "custom") == [{"progress": "thinking"}, {"progress": "done"}]


def test_several_modes_at_once(client: SyncLangGraphClient, thread_id: str) -> None:
    """Several modes interleave on one stream, each event named by its mode."""
    modes = ["values", "updates", "messages-tuple", "custom"]
    parts = stream(client, thread_id, CHAT, HI, modes)
    assert set(names(parts[1:])) == {"values", "updates", "messages", "custom"}
    assert of(parts, "custom") == [{"progress": "thinking"}, {"progress": "done"}]
    assert of(parts, "updates")[-1]["respond"]["messages"][0]["content"] == CHAT_REPLY  # type: ignore[index]


def test_resumable_stream_has_event_ids(client: SyncLangGraphClient, thread_id: str) -> None:
    """With ``stream_resumable`` every event carries an SSE ``id``."""
    parts = stream(client, thread_id, STEPS, {"label": "r"}, "values", stream_resumable=True)
    assert all(part.id for part in parts), [part.id for part in parts]


def test_async_client_streams(server_url: str) -> None:
    """The async client reads the same stream: metadata, then the values."""

    async def read(client: LangGraphClient) -> list[StreamPart]:
        thread = await client.threads.create()
        try:
            return [part async for part in client.runs.stream(
                thread["thread_id"], STEPS, input={"label": "a"}, stream_mode="values")]
        finally:
            await client.threads.delete(thread["thread_id"])

    parts = run_async(server_url, read)
    assert names(parts) == ["metadata"] + ["values"] * 4
    assert of(parts, "values")[-1] == {"label": "a", "steps": ["a:first", "a:middle", "a:last"]}
    assert uuid.UUID(parts[0].data["run_id"])


def test_error_ends_the_stream(client: SyncLangGraphClient, thread_id: str) -> None:
    """A node that raises ends the stream with ``error`` ``{error, message}``; run, thread error."""
    parts = stream(client, thread_id, STEPS, {"label": "e", "delay": "not a number"}, "values")
    last = body(parts)[-1]
    assert last.event == "error"
    assert last.data["error"] == "TypeError"
    assert isinstance(last.data["message"], str) and last.data["message"]
    assert client.runs.get(thread_id, parts[0].data["run_id"])["status"] == "error"
    assert client.threads.get(thread_id)["status"] == "error"


def test_dropped_stream_run_goes_on_by_default(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """A client that drops the stream mid-run leaves the run going (``on_disconnect`` continue)."""
    run_id = drop_after_first_update(client, thread_id, on_disconnect=None)
    wait_until(lambda: client.runs.get(thread_id, run_id)["status"] in TERMINAL, "run ends")
    assert client.runs.get(thread_id, run_id)["status"] == "success"
    assert client.threads.get_state(thread_id)["values"]["steps"] == [
        "d:first", "d:middle", "d:last"]


def test_dropped_stream_with_on_disconnect_cancel(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """``on_disconnect="cancel"``: dropping the stream cancels the run (run, thread interrupted)."""
    run_id = drop_after_first_update(client, thread_id, on_disconnect="cancel")
    wait_until(lambda: client.runs.get(thread_id, run_id)["status"] in TERMINAL, "run ends")
    assert client.runs.get(thread_id, run_id)["status"] == "interrupted"
    assert client.threads.get(thread_id)["status"] == "interrupted"


def drop_after_first_update(client: SyncLangGraphClient, thread_id: str,
                            on_disconnect: str | None) -> str:
    """Stream a run whose middle node waits 2 s, close the stream after the first
    node's update, and answer the run's id."""
    kwargs: dict[str, Any] = {} if on_disconnect is None else {"on_disconnect": on_disconnect}
    parts = client.runs.stream(thread_id, STEPS, input={"label": "d", "delay": 2.0},
                               stream_mode="updates", **kwargs)
    run_id = ""
    for part in parts:
        if part.event == "metadata":
            run_id = part.data["run_id"]
        if part.event == "updates":
            break
    parts.close()  # type: ignore[attr-defined]
    assert run_id
    return run_id


def test_stream_names_the_run_and_where_to_reconnect(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """A stream answers ``Content-Location`` (the run), ``Location`` (its stream: reconnects)."""
    with client.http.client.stream(
        "POST", f"/threads/{thread_id}/runs/stream",
        json={"assistant_id": STEPS, "input": {"label": "h"}, "stream_mode": "values"},
        headers={"Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        run_path = response.headers["content-location"]
        assert response.headers["location"] == f"{run_path}/stream"
        response.read()
    prefix, run_id = run_path.rsplit("/", 1)
    assert prefix == f"/threads/{thread_id}/runs"
    assert client.runs.get(thread_id, run_id)["status"] == "success"
