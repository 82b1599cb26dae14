"""``HayataGraph.cancel``: a run stopped in the middle of a node leaves its
thread as LangGraph leaves it (the last completed superstep, the stopped node
still to run), which is what a LangGraph run interrupted before that node
leaves; with ``rollback`` the thread is back where it was before the run."""

from __future__ import annotations

import operator
import time
from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import hayata_py as hy
from hayata_py import langgraph as hylg
from tests.helpers import eventually, in_thread

pytestmark = pytest.mark.timeout(180)


class GatedState(TypedDict):
    steps: Annotated[list[str], operator.add]
    label: str
    gate: NotRequired[str]


def g_first(state: GatedState) -> dict[str, Any]:
    return {"steps": [f"{state['label']}:first"]}


def g_middle(state: GatedState) -> dict[str, Any]:
    """Marks that it started, then waits (at most 90 s) for the gate file."""
    gate = Path(state["gate"])
    Path(f"{gate}.{state['label']}.started").touch()
    deadline = time.monotonic() + 90
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the node's work
    return {"steps": [f"{state['label']}:middle"]}


def g_last(state: GatedState) -> dict[str, Any]:
    return {"steps": [f"{state['label']}:last"]}


gated = StateGraph(GatedState)
gated.add_node("first", g_first)
gated.add_node("middle", g_middle)
gated.add_node("last", g_last)
gated.add_edge(START, "first")
gated.add_edge("first", "middle")
gated.add_edge("middle", "last")
gated.add_edge("last", END)


def started(tmp_path: Path, label: str) -> bool:
    return (tmp_path / f"shut.{label}.started").exists()


def stopped_mid_run(app: hylg.HayataGraph, tmp_path: Path, config: dict[str, Any],
                    label: str, *, rollback: bool = False) -> str:
    """Start a run whose middle node waits on a gate that stays shut; cancel it there."""
    running = in_thread(lambda: app.invoke(
        {"label": label, "gate": str(tmp_path / "shut")}, config))
    eventually(lambda: started(tmp_path, label), timeout=60, message="the middle node started")
    # LangGraph shows the completed superstep during the run.
    assert app.get_state(config).values["steps"][-1] == f"{label}:first"
    invocation = app.cancel(config, rollback=rollback)
    assert invocation is not None
    with pytest.raises(hy.HayataError) as caught:
        running.result(timeout=60)
    assert caught.value.code == "cancelled"
    return invocation


def test_cancel_keeps_the_completed_supersteps_as_langgraph_does(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "cancel-1"}}
    opened = str(tmp_path / "open")
    Path(opened).touch()
    saver = InMemorySaver()  # LangGraph: run "a" stopped before its middle node
    reference = gated.compile(checkpointer=saver, interrupt_before=["middle"])
    reference.invoke({"label": "a", "gate": str(tmp_path / "shut")}, config)
    want_state = reference.get_state(config)
    want_final = gated.compile(checkpointer=saver).invoke({"label": "b", "gate": opened},
                                                          config)
    with hy.AgentSystem(tmp_path / "data") as system:
        app = hylg.compile("tests.lgcompat.test_cancel:gated", system, id="gated")
        invocation = stopped_mid_run(app, tmp_path, config, "a")
        state = app.get_state(config)
        assert (state.values, state.next) == (want_state.values, want_state.next)
        assert state.values["steps"] == ["a:first"]
        records = {record.node_id: record for record, _ in app.agent.tasks(invocation)}
        assert records["first"].status == "completed"
        assert (records["middle"].status, (records["middle"].error or {}).get("code")) == (
            "failed", "cancelled")
        assert app.cancel(config) is None  # nothing runs: a no-op
        final = app.invoke({"label": "b", "gate": opened}, config)
    assert final == want_final
    assert final["steps"] == ["a:first", "b:first", "b:middle", "b:last"]


def test_rollback_forgets_the_cancelled_run(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "cancel-2"}}
    opened = str(tmp_path / "open")
    Path(opened).touch()
    with hy.AgentSystem(tmp_path / "data") as system:
        app = hylg.compile("tests.lgcompat.test_cancel:gated", system, id="gated")
        before = app.invoke({"label": "p", "gate": opened}, config)
        history = [s.config for s in app.get_state_history(config)]
        stopped_mid_run(app, tmp_path, config, "a", rollback=True)
        assert app.get_state(config).values == before
        assert app.get_state(config).next == ()
        assert [s.config for s in app.get_state_history(config)] == history
        final = app.invoke({"label": "b", "gate": opened}, config)
        assert final["steps"] == ["p:first", "p:middle", "p:last",
                                  "b:first", "b:middle", "b:last"]

        # The thread's first run rolled back: the thread is empty again.
        fresh = {"configurable": {"thread_id": "cancel-3"}}
        stopped_mid_run(app, tmp_path, fresh, "c", rollback=True)
        assert app.get_state(fresh).values == {}
        assert app.invoke({"label": "d", "gate": opened}, fresh)["steps"] == [
            "d:first", "d:middle", "d:last"]
