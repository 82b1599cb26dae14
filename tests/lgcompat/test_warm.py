"""The agent process keeps a run's LangGraph loop open between its decisions
(``hayata_py.langgraph._warm``); a decision that cannot use it opens the loop
again on the snapshot. Both must give the same run: driven here decision by
decision in one process (the policy and the node functions as hayata calls
them), once with the loop held and once opened again at every decision."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.types import Interrupt

from hayata_py._policy import Finish, Map, Next, NodeContext, PolicyContext
from hayata_py.langgraph import _steps, _warm
from hayata_py.langgraph._snapshot import dump_value, load_saver, load_value

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("LGCOMPAT_DIR", str(tmp_path))
    yield


def _norm(value: Any) -> Any:
    """Values with fresh ids blanked (messages, interrupts)."""
    if isinstance(value, BaseMessage):
        return value.model_copy(update={"id": None})
    if isinstance(value, Interrupt):
        return ("Interrupt", _norm(value.value))
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_norm(v) for v in value)
    return value


def _settings(graph: str, thread: str) -> dict[str, Any]:
    return {"graph": graph, "thread": thread, "configurable": dump_value({}),
            "recursion_limit": 25, "modes": ["updates", "values"], "interrupt_before": [],
            "interrupt_after": [], "checkpoint_id": None, "raise_nodes": [],
            "output": False, "context": None}


def _run(graph: str, input: Any, *, held: bool, snapshot: bytes | None = None
         ) -> tuple[list[Any], dict[str, Any]]:
    """The run's decisions (node names and chunks streamed per step) and its end."""
    thread = f"t-{uuid.uuid4().hex[:8]}"
    invocation = uuid.uuid4().hex
    run = {"r": _settings(graph, thread), "s": snapshot, "prev": None,
           "in": dump_value(input)}
    results: list[Any] | None = None
    decisions: list[Any] = []
    for step in range(50):
        if not held:
            _warm.drop(invocation)
        decision = _steps.decide(PolicyContext(step, {}, run, None, results, invocation,
                                               thread=thread))
        if isinstance(decision, Finish):
            assert invocation not in _warm._HELD
            return decisions, decision.result
        calls: list[tuple[str, Any, int | None]]
        if isinstance(decision, Map):
            calls = [(decision.node, item, i) for i, item in enumerate(decision.items)]
        else:
            assert isinstance(decision, Next) and isinstance(decision.node, list)
            calls = [(node, decision.input, None) for node in decision.node]
        streamed = calls[0][1]["c"]
        decisions.append((sorted(node for node, _, _ in calls), _norm(load_value(streamed))))
        results = [_steps.run_node(NodeContext(item_input, {}, node, invocation, "e", "t",
                                               "k", item=item))
                   for node, item_input, item in calls]
    raise AssertionError("the run did not end")


def _end(result: dict[str, Any]) -> dict[str, Any]:
    saver = load_saver(result["s"])
    values = {}
    for thread in saver.storage:
        tuple_ = saver.get_tuple({"configurable": {"thread_id": thread,
                                                   "checkpoint_ns": ""}})
        assert tuple_ is not None
        values = {k: v for k, v in tuple_.checkpoint["channel_values"].items()
                  if not k.startswith("branch:")}
    return {"status": result["status"], "out": _norm(load_value(result["out"])),
            "chunks": _norm(load_value(result["c"])),
            "ints": _norm(load_value(result["ints"])) if result.get("ints") else None,
            "values": _norm(values)}


@pytest.mark.parametrize(("name", "input"), [
    ("sequence", {"text": "", "steps": []}),
    ("branch", {"n": 20}),
    ("fanout", {"topic": "t"}),
    ("mapreduce", {"subjects": ["cats", "dogs", "owls"]}),
    ("goto", {"value": 3}),
    ("mixed", {"subjects": ["a", "b"]}),
    ("approval", {"question": "deploy?"}),
    ("two_asks", {"answers": []}),
    ("chat", {"messages": [("user", "weather in Paris?")]}),
    ("forever", {"count": 0}),
])
def test_held_loop_runs_as_a_reopened_one(name: str, input: Any) -> None:
    graph = f"tests.lgcompat.graphs:{name}"
    held_decisions, held_end = _run(graph, input, held=True)
    reopened_decisions, reopened_end = _run(graph, input, held=False)
    assert held_decisions == reopened_decisions
    assert len(held_decisions) >= 1
    assert _end(held_end) == _end(reopened_end)


def test_a_stale_held_run_is_dropped_not_used() -> None:
    graph = "tests.lgcompat.graphs:sequence"
    thread = "t-stale"
    invocation = uuid.uuid4().hex
    run: dict[str, Any] = {"r": _settings(graph, thread), "s": None, "prev": None,
                           "in": dump_value({"text": "", "steps": []})}
    first = _steps.decide(PolicyContext(0, {}, run, None, None, invocation, thread=thread))
    assert isinstance(first, Next) and invocation in _warm._HELD
    result = _steps.run_node(NodeContext(first.input, {}, first.node[0], invocation, "e",
                                         "t", "k"))
    # the lead task hands back another snapshot than the held loop stopped at
    other = _run(graph, {"text": "x", "steps": []}, held=True)[1]["s"]
    stale = {**result, "s": other}
    assert _warm.resume(invocation, 1, run["r"], stale["s"], stale["k"],
                        {}) is None
    assert invocation not in _warm._HELD


def test_the_quick_saver_is_langgraphs_in_memory_saver() -> None:
    """``_snapshot.Saver`` skips ``InMemorySaver.__init__``: it must set the
    same attributes, of the same types, with the same serializer."""
    import inspect

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.pregel._checkpoint import put_writes_accepts_task_path

    from hayata_py.langgraph._snapshot import Saver

    ours, theirs = vars(Saver()), vars(InMemorySaver())
    assert {k: type(v) for k, v in ours.items()} == {k: type(v) for k, v in theirs.items()}
    assert ours["serde"] is theirs["serde"]
    assert put_writes_accepts_task_path(Saver().put_writes)
    assert list(inspect.signature(Saver().put_writes).parameters) == \
        list(inspect.signature(InMemorySaver().put_writes).parameters)
