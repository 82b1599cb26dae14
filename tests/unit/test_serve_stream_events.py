"""What a served run logs of each stream chunk (``StreamEvents``), in tables."""

from __future__ import annotations

from typing import Any

import pytest

from hayata_py.serve._runs import StreamEvents

ASKED = {"value": {"question": "?"}, "id": "i1"}
LOGGED = {**ASKED, "response_schema": None}


@pytest.mark.parametrize(("namespace", "mode", "chunk", "event"), [
    ((), "values", {"n": 1}, ("values", {"n": 1})),
    ((), "updates", {"a": {"n": 1}}, ("updates", {"a": {"n": 1}})),
    ((), "custom", {"p": 1}, ("custom", {"p": 1})),
    ((), "messages", ({"type": "ai", "content": "x"}, {"langgraph_node": "a"}),
     ("messages", [{"type": "ai", "content": "x"}, {"langgraph_node": "a"}])),
    ((), "updates", {"__interrupt__": [ASKED]}, ("updates", {"__interrupt__": [LOGGED]})),
    (("inner:t1",), "updates", {"one": {"n": 2}}, ("updates|inner:t1", {"one": {"n": 2}})),
    (("inner:t1", "deep:t2"), "values", {"n": 3}, ("values|inner:t1|deep:t2", {"n": 3})),
    (("talk:t3",), "messages", ({"content": "y"}, {"langgraph_node": "respond"}),
     ("messages|talk:t3", [{"content": "y"}, {"langgraph_node": "respond"}])),
])
def test_each_chunk_is_logged_as_langgraphs_server_names_it(
        namespace: tuple[str, ...], mode: str, chunk: Any, event: tuple[str, Any]) -> None:
    assert StreamEvents().event(namespace, mode, chunk) == event


@pytest.mark.parametrize(("chunks", "interrupts", "closing"), [
    ([((), "values", {"n": 1})], [], None),  # ran to its end: nothing to add
    ([((), "values", {"n": 1}), ((), "updates", {"__interrupt__": [ASKED]})], [LOGGED],
     ("values", {"n": 1, "__interrupt__": [LOGGED]})),
    ([((), "updates", {"__interrupt__": [ASKED]})], [LOGGED],  # no values streamed yet
     ("values", {"__interrupt__": [LOGGED]})),
    ([((), "updates", {"__interrupt__": [ASKED]}),  # the last values carry them already
      ((), "values", {"n": 1, "__interrupt__": [LOGGED]})], [LOGGED], None),
    ([(("inner:t1",), "updates", {"__interrupt__": [ASKED]}),  # a subgraph's tells nothing
      (("inner:t1",), "values", {"n": 9})], [], None),
])
def test_what_the_stream_told_of_the_runs_end(
        chunks: list[tuple[tuple[str, ...], str, Any]], interrupts: list[Any],
        closing: tuple[str, Any] | None) -> None:
    told = StreamEvents()
    for namespace, mode, chunk in chunks:
        told.event(namespace, mode, chunk)
    assert told.interrupts == interrupts
    assert told.closing() == closing
