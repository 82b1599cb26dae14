"""``stream_subgraphs``: the events of a subgraph's steps, named ``mode|namespace``.

The ``nested`` graph runs ``before``, then the subgraph ``inner`` (``one``,
``two``), then the ``chat`` graph as the subgraph node ``talk``. A namespace
is ``node:task id`` per level (LangGraph's own form), joined with ``|``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.schema import StreamPart

from tests.serve_api.support import CHAT_REPLY, NESTED, TERMINAL, names, of

pytestmark = pytest.mark.timeout(60)

HI = {"messages": [{"role": "user", "content": "hi"}]}


def stream(client: SyncLangGraphClient, thread_id: str, mode: str | list[str],
           **kwargs: Any) -> list[StreamPart]:
    return list(client.runs.stream(thread_id, NESTED, input=HI,
                                   stream_mode=mode, **kwargs))  # type: ignore[arg-type]


def split(name: str) -> tuple[str, list[str]]:
    """An event name's mode and its namespace's levels, each ``node:task id``."""
    mode, *levels = name.split("|")
    return mode, levels


def nodes(levels: list[str]) -> list[str]:
    node_names = [level.partition(":")[0] for level in levels]
    assert all(level.partition(":")[2] for level in levels), levels
    return node_names


def test_updates_of_the_subgraphs_come_named_by_their_namespace(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """Each subgraph step's update comes as ``updates|<node>:<task id>`` before the
    parent's update of the node that ran the subgraph."""
    parts = stream(client, thread_id, "updates", stream_subgraphs=True)
    seen = [(split(p.event), p.data) for p in parts[1:]]
    assert [(mode, nodes(levels)) for (mode, levels), _ in seen] == [
        ("updates", []), ("updates", ["inner"]), ("updates", ["inner"]), ("updates", []),
        ("updates", ["talk"]), ("updates", []),
    ]
    assert [data for _, data in seen][:4] == [
        {"before": {"trail": ">before"}},
        {"one": {"trail": ">before>one"}},
        {"two": {"trail": ">before>one>two"}},
        {"inner": {"trail": ">before>one>two", "messages": seen[3][1]["inner"]["messages"]}},
    ]
    inner_levels = {tuple(levels) for (_, levels), _ in seen if levels and levels[0].startswith(
        "inner:")}
    assert len(inner_levels) == 1, "one task ran the subgraph: one namespace"
    assert client.runs.get(thread_id, parts[0].data["run_id"])["status"] in TERMINAL


def test_without_stream_subgraphs_only_the_parent_streams(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """Without ``stream_subgraphs`` no event names a namespace."""
    parts = stream(client, thread_id, ["updates", "values", "messages-tuple"])
    assert not [n for n in names(parts) if "|" in n]
    assert [list(u) for u in of(parts, "updates")] == [["before"], ["inner"], ["talk"]]


def test_values_of_a_subgraph(client: SyncLangGraphClient, thread_id: str) -> None:
    """``values|inner:<id>``: the subgraph's whole state, after its input and each step."""
    parts = stream(client, thread_id, "values", stream_subgraphs=True)
    inner = [p.data["trail"] for p in parts if split(p.event)[0] == "values"
             and nodes(split(p.event)[1]) == ["inner"]]
    assert inner == [">before", ">before>one", ">before>one>two"]
    parent = [p.data.get("trail") for p in parts if p.event == "values"]
    assert parent == [None, ">before", ">before>one>two", ">before>one>two"]


def test_messages_tuple_of_a_subgraph(client: SyncLangGraphClient, thread_id: str) -> None:
    """``messages-tuple``: a subgraph's tokens come as ``messages|talk:<id>``."""
    parts = stream(client, thread_id, "messages-tuple", stream_subgraphs=True)
    tokens = [p for p in parts[1:] if split(p.event)[0] == "messages"]
    assert {tuple(nodes(split(p.event)[1])) for p in tokens} == {("talk",)}
    assert "".join(p.data[0]["content"] for p in tokens) == CHAT_REPLY
    assert {p.data[1]["langgraph_node"] for p in tokens} == {"respond"}


def test_messages_mode_of_a_subgraph(client: SyncLangGraphClient, thread_id: str) -> None:
    """``messages``: the message so far, as without subgraphs (no namespace in the name)."""
    parts = stream(client, thread_id, "messages", stream_subgraphs=True)
    kinds = names(parts[1:])
    assert kinds[0] == "messages/metadata" and set(kinds[1:]) == {"messages/partial"}
    assert of(parts, "messages/partial")[-1][0]["content"] == CHAT_REPLY  # type: ignore[index]
