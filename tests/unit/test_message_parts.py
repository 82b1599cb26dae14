"""The ``messages`` stream mode made from logged ``[message, metadata]`` pairs:
metadata once per message, the message so far after each chunk, and a reader
resuming mid-message gets the sum, not the chunk."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, AIMessageChunk

from hayata_py.serve._message_parts import MessageParts
from hayata_py.serve._wire import jsonable

META = {"langgraph_node": "respond"}


def _logged(message: object) -> str:
    return json.dumps([jsonable(message), META])


CHUNKS = [_logged(AIMessageChunk(content=text, id="m1")) for text in ("hel", "lo ", "you")]


def test_each_chunk_gives_the_message_so_far() -> None:
    parts = MessageParts()
    events = [event for raw in CHUNKS for event in parts.events(raw)]
    assert [name for name, _ in events] == ["messages/metadata"] + ["messages/partial"] * 3
    assert json.loads(events[0][1]) == {"m1": {"metadata": META}}
    sofar = [json.loads(data)[0] for _, data in events[1:]]
    assert [m["content"] for m in sofar] == ["hel", "hello ", "hello you"]
    assert {m["type"] for m in sofar} == {"ai"} and {m["id"] for m in sofar} == {"m1"}


def test_a_resumed_reader_gets_the_sum_without_the_metadata_again() -> None:
    parts = MessageParts()
    parts.prime(CHUNKS[:2])
    events = parts.events(CHUNKS[2])
    assert [name for name, _ in events] == ["messages/partial"]
    assert json.loads(events[0][1])[0]["content"] == "hello you"


def test_a_whole_message_is_complete_and_other_logged_data_is_skipped() -> None:
    parts = MessageParts()
    events = parts.events(_logged(AIMessage(content="done", id="m2")))
    assert [name for name, _ in events] == ["messages/metadata", "messages/complete"]
    assert json.loads(events[1][1])[0]["content"] == "done"
    assert parts.events(json.dumps({"not": "a pair"})) == []
