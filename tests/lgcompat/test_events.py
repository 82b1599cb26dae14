"""``astream_events`` (LangChain's stream events, version ``"v2"``) and the
``events`` stream mode against LangGraph's own ``astream_events``: the same
events in the same order, each with the same name, tags, depth of parents,
LangGraph metadata and data (run ids and task ids differ: each runtime makes
its own). A task's events are made in its node's process as it runs."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

import hayata_py as hy
from hayata_py import langgraph as hylg
from tests.lgcompat import graphs

pytestmark = pytest.mark.timeout(120)


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def _data(value: Any) -> Any:
    """``value`` with messages as their type and content (their ids and run
    ids are each runtime's own)."""
    if isinstance(value, BaseMessage):
        return (value.type, value.content, [c["name"] for c in getattr(value, "tool_calls", [])])
    if isinstance(value, dict):
        return {k: _data(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_data(v) for v in value]
    return value


def _event(event: dict[str, Any]) -> tuple[Any, ...]:
    metadata = {k: v.split(":")[0] if k == "langgraph_checkpoint_ns" else v
                for k, v in event["metadata"].items() if k.startswith("langgraph_")}
    data = {k: _data(v) for k, v in event["data"].items()
            if not event["event"].startswith("on_chat_model") or k != "input"}
    return (event["event"], event["name"], tuple(event["tags"]), len(event["parent_ids"]),
            metadata, data)


async def _events(app: Any, given: Any) -> list[dict[str, Any]]:
    return [e async for e in app.astream_events(given, _config(), version="v2")]


CASES = [
    ("sequence", {"text": "", "steps": []}),
    ("chat", {"messages": [("user", "weather in Paris?")]}),
    ("talker", {"messages": [("user", "hi")]}),
]


@pytest.mark.parametrize(("name", "given"), CASES, ids=[c[0] for c in CASES])
def test_astream_events_as_langgraphs(system: hy.AgentSystem, name: str, given: Any) -> None:
    builder = getattr(graphs, name)
    app = hylg.compile(builder, system, id=f"events-{name}")
    ours = asyncio.run(_events(app, given))
    theirs = asyncio.run(_events(builder.compile(checkpointer=InMemorySaver()), given))
    assert [_event(e) for e in ours] == [_event(e) for e in theirs]
    # one root: the graph's run, every other event's first parent
    root = ours[0]["run_id"]
    assert (ours[0]["event"], ours[-1]["event"]) == ("on_chain_start", "on_chain_end")
    assert all(e["parent_ids"][0] == root for e in ours if e["run_id"] != root)


def test_the_events_mode_with_others_and_a_given_run_id(system: hy.AgentSystem) -> None:
    """``stream_mode=["events", "updates"]``: the events (no graph-level
    ``on_chain_stream``, as LangGraph's server streams them) beside the
    updates; ``config["run_id"]`` is the root's id and ``run_name`` its name."""
    app = hylg.compile(graphs.sequence, system, id="events-modes")
    run_id = str(uuid.uuid4())
    out = list(app.stream({"text": "", "steps": []},
                          {**_config(), "run_id": run_id, "run_name": "seq"},
                          stream_mode=["events", "updates"]))
    events = [chunk for mode, chunk in out if mode == "events"]
    assert [chunk for mode, chunk in out if mode == "updates"] == [
        {"a": {"text": "a", "steps": ["a"]}}, {"b": {"text": "ab", "steps": ["b"]}},
        {"c": {"text": "abc", "steps": ["c"]}}]
    assert (events[0]["event"], events[0]["name"], events[0]["run_id"]) == (
        "on_chain_start", "seq", run_id)
    assert (events[-1]["event"], events[-1]["run_id"]) == ("on_chain_end", run_id)
    assert [(e["event"], e["name"]) for e in events[1:-1]] == [
        (kind, node) for node in "abc"
        for kind in ("on_chain_start", "on_chain_stream", "on_chain_end")]
    assert all(e["parent_ids"] == [run_id] for e in events[1:-1])


def test_astream_events_refuses_other_versions(system: hy.AgentSystem) -> None:
    app = hylg.compile(graphs.sequence, system, id="events-v1")

    async def first(**kwargs: Any) -> Any:
        async for event in app.astream_events({"text": "", "steps": []}, _config(), **kwargs):
            return event
        return None
    with pytest.raises(hy.ConfigError, match="v2") as refused:
        asyncio.run(first(version="v1"))
    assert refused.value.details["field"] == "version"
    with pytest.raises(hy.ConfigError) as refused:
        asyncio.run(first(stream_mode="values"))
    assert refused.value.details["field"] == "stream_mode"
