"""kill -9 of the whole system in the middle of a graph: on the same thread,
``invoke(None, config)`` reuses the completed node, refuses the node whose
outcome is unknown with ``hylg.TaskUncertain``, and once that node is declared
idempotent runs it again and goes on; nothing completed runs twice."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py import langgraph as hylg
from tests.helpers import eventually, find, in_thread

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def counts(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "counts"
    folder.mkdir()
    old = os.environ.get("LGCOMPAT_DIR")
    os.environ["LGCOMPAT_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("LGCOMPAT_DIR", None)
    else:
        os.environ["LGCOMPAT_DIR"] = old


def runs(folder: Path, name: str) -> int:
    path = folder / f"{name}.runs"
    return len(path.read_text()) if path.exists() else 0


def test_whole_system_kill_mid_node(tmp_path: Path, counts: Path) -> None:
    config = {"configurable": {"thread_id": "crash-1"}}
    data = tmp_path / "data"
    system = hy.AgentSystem(data)
    try:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow")
        running = in_thread(lambda: app.invoke({"steps": []}, config))
        eventually(lambda: runs(counts, "slow_b") == 1, timeout=60,
                   message="node b started")
        system.kill()
        with pytest.raises(Exception):  # noqa: B017 - the caller's wait ends with the system
            running.result(timeout=60)
    finally:
        system.shutdown()
    assert (runs(counts, "slow_a"), runs(counts, "slow_b"), runs(counts, "slow_c")) == (1, 1, 0)

    (counts / "release").write_text("go")
    with hy.AgentSystem(data) as system:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow")
        with pytest.raises(hylg.TaskUncertain) as caught:
            app.invoke(None, config)
        error = caught.value
        assert isinstance(error, hy.HayataError) and error.code == "task_uncertain"
        assert error.details["nodes"] == ["b"] and error.details["task_ids"]
        assert "uncertain='interrupt'" in str(error) and "abandon" in str(error)
        assert runs(counts, "slow_b") == 1
        waiting = app.uncertain_tasks("crash-1")
        assert [(w["node"], w["task_id"]) for w in waiting] == [
            ("b", error.details["task_ids"][0])]
        assert set(waiting[0]["answers"]) == {"completed", "rerun", "abandon"}
        system.stop_agent("slow")
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow",
                           idempotent_nodes={"b"})
        final = app.invoke(None, config)
        assert final == {"steps": ["a", "b", "c"]}
        assert app.uncertain_tasks("crash-1") == []
        assert app.get_state(config).values == {"steps": ["a", "b", "c"]}
        assert [s.values["steps"] for s in app.get_state_history(config)] == [
            ["a", "b", "c"], ["a", "b"], ["a"], [], []]
    assert (runs(counts, "slow_a"), runs(counts, "slow_b"), runs(counts, "slow_c")) == (1, 2, 1)


def _edge(system: hy.AgentSystem, node: str) -> int:
    row = find(system.tree(), "edge", f"{node}.edge-1")
    assert row is not None, "no edge of node b"
    return int(row["pid"])


def test_edge_kill_mid_node_keeps_the_runs_progress(tmp_path: Path, counts: Path) -> None:
    config = {"configurable": {"thread_id": "edge-1"}}
    with hy.AgentSystem(tmp_path / "data") as system:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-edge")
        running = in_thread(lambda: app.invoke({"steps": []}, config))
        eventually(lambda: runs(counts, "slow_b") == 1, timeout=60, message="node b started")
        os.kill(_edge(system, "b"), signal.SIGKILL)
        with pytest.raises(hy.HayataError) as caught:
            running.result(timeout=60)
        assert caught.value.code == "node_failed"
        state = app.get_state(config)
        assert state.values == {"steps": ["a"]} and state.next == ("b",)
        assert "node_failed" in str(state.tasks[0].error)
        assert [s.next for s in app.get_state_history(config)] == [("b",), ("a",),
                                                                  ("__start__",)]
        (counts / "release").write_text("go")
        assert app.invoke(None, config) == {"steps": ["a", "b", "c"]}
        # the history runs through the failed run's progress into the one after it
        assert [s.next for s in app.get_state_history(config)] == [
            (), ("c",), ("b",), ("a",), ("__start__",)]
    assert (runs(counts, "slow_a"), runs(counts, "slow_b"), runs(counts, "slow_c")) == (1, 2, 1)


def test_agent_kill_mid_node_then_invoke_none_goes_on(tmp_path: Path, counts: Path) -> None:
    config = {"configurable": {"thread_id": "agent-1"}}
    with hy.AgentSystem(tmp_path / "data") as system:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-agent")
        running = in_thread(lambda: app.invoke({"steps": []}, config))
        eventually(lambda: runs(counts, "slow_b") == 1, timeout=60, message="node b started")
        agent = find(system.tree(), "agent", "agent")
        assert agent is not None
        os.kill(int(agent["pid"]), signal.SIGKILL)
        with pytest.raises(hy.HayataError) as caught:
            running.result(timeout=60)
        assert caught.value.code in ("recovery_required", "invocation_interrupted")
        # the edge lives on and finishes node b; its result is recorded
        (counts / "release").write_text("go")

        def b_completed() -> bool:
            return any(record.node_id == "b" and record.status == "completed"
                       for record, _ in app.agent.tasks())
        eventually(b_completed, timeout=60, message="node b's result recorded")
        assert app.invoke(None, config) == {"steps": ["a", "b", "c"]}
        # the new agent process opened the run's loop again from its last step: the
        # history still has the checkpoints of the steps before the kill
        assert [s.next for s in app.get_state_history(config)] == [
            (), ("c",), ("b",), ("a",), ("__start__",)]
    assert (runs(counts, "slow_a"), runs(counts, "slow_b"), runs(counts, "slow_c")) == (1, 1, 1)


def test_uncertain_as_an_interrupt(tmp_path: Path, counts: Path) -> None:
    """uncertain="interrupt": three runs cut off in node b by a whole-system
    kill, each answered one way: completed (with the node's update), rerun, abandon."""
    from langgraph.types import Command

    threads = ["said-done", "said-rerun", "said-abandon"]
    configs = {t: {"configurable": {"thread_id": t}} for t in threads}
    data = tmp_path / "data"
    system = hy.AgentSystem(data)
    try:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-ask",
                           max_invocations=3)
        def start(thread: str) -> Any:
            return in_thread(lambda: app.invoke({"steps": []}, configs[thread]))

        running = [start(t) for t in threads]
        eventually(lambda: runs(counts, "slow_b") == 3, timeout=60,
                   message="node b started in the three runs")
        system.kill()
        for future in running:
            with pytest.raises(Exception):  # noqa: B017 - the caller's wait ends with the system
                future.result(timeout=60)
    finally:
        system.shutdown()
    (counts / "release").write_text("go")
    with hy.AgentSystem(data) as system:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-ask",
                           max_invocations=3, uncertain="interrupt")
        for thread in threads:
            paused = app.invoke(None, configs[thread])
            assert paused["steps"] == ["a"]
            (asked,) = paused["__interrupt__"]
            assert asked.value["uncertain"]["node"] == "b"
            assert asked.value["uncertain"]["input"] == {"steps": ["a"]}
            assert app.get_state(configs[thread]).next == ("b",)
        done = app.invoke(Command(resume={"completed": {"steps": ["b-said"]}}),
                          configs["said-done"])
        assert done == {"steps": ["a", "b-said", "c"]}
        assert runs(counts, "slow_b") == 3
        rerun = app.invoke(Command(resume={"rerun": True}), configs["said-rerun"])
        assert rerun == {"steps": ["a", "b", "c"]}
        assert runs(counts, "slow_b") == 4
        abandoned = app.invoke(Command(resume={"abandon": True}), configs["said-abandon"])
        assert abandoned == {"steps": ["a"]}
        assert app.get_state(configs["said-abandon"]).next == ("b",)
    assert runs(counts, "slow_a") == 3 and runs(counts, "slow_c") == 2


def test_whole_system_kill_then_auto_recover(tmp_path: Path, counts: Path) -> None:
    """With auto_recover and the cut-off node declared idempotent, the restarted
    agent goes on by itself; invoke(None, config) waits for that run's end."""
    config = {"configurable": {"thread_id": "auto-1"}}
    data = tmp_path / "data"
    system = hy.AgentSystem(data)
    try:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-auto")
        running = in_thread(lambda: app.invoke({"steps": []}, config))
        eventually(lambda: runs(counts, "slow_b") == 1, timeout=60, message="node b started")
        system.kill()
        with pytest.raises(Exception):  # noqa: B017 - the caller's wait ends with the system
            running.result(timeout=60)
    finally:
        system.shutdown()
    (counts / "release").write_text("go")
    with hy.AgentSystem(data) as system:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-auto",
                           auto_recover=True, idempotent_nodes={"b"})
        assert app.invoke(None, config) == {"steps": ["a", "b", "c"]}
        assert app.get_state(config).values == {"steps": ["a", "b", "c"]}
    assert (runs(counts, "slow_a"), runs(counts, "slow_b"), runs(counts, "slow_c")) == (1, 2, 1)


def test_a_stream_of_a_run_auto_recover_carries_on_gets_each_step(
        tmp_path: Path, counts: Path) -> None:
    """After a whole-system kill, the restarted agent carries the run on by itself
    (auto_recover); ``stream(None, config)`` on its thread gets the chunks of
    every step from where the run started again (the cut-off step's lead gives
    the superstep before it, as in a live stream), not only the last one."""
    config = {"configurable": {"thread_id": "auto-stream"}}
    data = tmp_path / "data"
    system = hy.AgentSystem(data)
    try:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-stream")
        running = in_thread(lambda: app.invoke({"steps": []}, config))
        eventually(lambda: runs(counts, "slow_b") == 1, timeout=60, message="node b started")
        system.kill()
        with pytest.raises(Exception):  # noqa: B017 - the caller's wait ends with the system
            running.result(timeout=60)
    finally:
        system.shutdown()
    with hy.AgentSystem(data) as system:
        app = hylg.compile("tests.lgcompat.graphs:slow", system, id="slow-stream",
                           auto_recover=True, idempotent_nodes={"b"})
        eventually(lambda: runs(counts, "slow_b") == 2, timeout=60,
                   message="the agent ran node b again by itself")
        streamed = in_thread(lambda: list(app.stream(None, config,
                                                     stream_mode=["updates", "values"])))
        (counts / "release").write_text("go")
        chunks = streamed.result(timeout=60)
        assert app.get_state(config).values == {"steps": ["a", "b", "c"]}
    assert chunks == [
        ("updates", {"a": {"steps": ["a"]}}), ("values", {"steps": ["a"]}),
        ("updates", {"b": {"steps": ["b"]}}), ("values", {"steps": ["a", "b"]}),
        ("updates", {"c": {"steps": ["c"]}}), ("values", {"steps": ["a", "b", "c"]})]
    assert (runs(counts, "slow_a"), runs(counts, "slow_b"), runs(counts, "slow_c")) == (1, 2, 1)


def _wide_cut_after_quick(data: Path, counts: Path, agent_id: str, config: Any) -> None:
    """Stream a run of ``wide`` and kill the whole system once its node quick
    (the superstep's lead) is recorded completed and node slow has started."""
    system = hy.AgentSystem(data)
    try:
        app = hylg.compile("tests.lgcompat.graphs:wide", system, id=agent_id)
        running = in_thread(lambda: list(app.stream({"steps": []}, config,
                                                    stream_mode=["custom", "updates"])))
        eventually(lambda: runs(counts, "wide_slow") == 1 and any(
            record.node_id == "quick" and record.status == "completed"
            for record, _ in app.agent.tasks()), timeout=60,
            message="node slow started and node quick recorded completed")
        system.kill()
        with pytest.raises(Exception):  # noqa: B017 - the caller's wait ends with the system
            running.result(timeout=60)
    finally:
        system.shutdown()


def _wide_carried_on(data: Path, counts: Path, agent_id: str, config: Any) -> list[Any]:
    """Restart with ``auto_recover`` (node slow idempotent) and stream the
    thread once the agent runs node slow again; the chunks."""
    with hy.AgentSystem(data) as system:
        app = hylg.compile("tests.lgcompat.graphs:wide", system, id=agent_id,
                           auto_recover=True, idempotent_nodes={"slow"})
        eventually(lambda: runs(counts, "wide_slow") == 2, timeout=60,
                   message="the agent ran node slow again by itself")
        streamed = in_thread(lambda: list(app.stream(None, config,
                                                     stream_mode=["custom", "updates"])))
        (counts / "release").write_text("go")
        chunks: list[Any] = streamed.result(timeout=60)
    return chunks


WIDE_CARRIED_ON = [("custom", {"slow": "working"}),
                   ("updates", {"quick": {"steps": ["quick"]}}),
                   ("updates", {"slow": {"steps": ["slow"]}}),
                   ("updates", {"join": {"steps": ["join"]}})]
"""The chunks of ``wide`` carried on from its cut-off superstep."""


def test_a_carried_on_step_whose_first_node_was_done_streams_its_other_nodes(
        tmp_path: Path, counts: Path) -> None:
    """A superstep of two nodes cut off after its first (the step's lead, which
    gave the superstep before it) completed: carried on by ``auto_recover``,
    the other node's chunks still come in ``stream(None, config)``, once each:
    not held back for a lead that will not give them again, and not read from
    before the run's new start (which the agent stores before it answers)."""
    config = {"configurable": {"thread_id": "auto-wide"}}
    _wide_cut_after_quick(tmp_path / "data", counts, "wide", config)
    assert _wide_carried_on(tmp_path / "data", counts, "wide", config) == WIDE_CARRIED_ON
    assert (runs(counts, "wide_quick"), runs(counts, "wide_slow"), runs(counts, "wide_join")) \
        == (1, 2, 1)


def test_a_carried_on_step_whose_lead_chunks_were_lost_gives_its_other_nodes_chunks(
        tmp_path: Path, counts: Path) -> None:
    """The same superstep cut off after its lead completed, but the kill came
    before the log stored the chunks the lead streams first (as the test above
    can find it under load): here the run's stored chunks are deleted while no
    process runs. Carried on by ``auto_recover``, the other node's chunks come
    at once, not held for a lead that does not run again."""
    config = {"configurable": {"thread_id": "auto-wide-lost"}}
    _wide_cut_after_quick(tmp_path / "data", counts, "wide-lost", config)
    with sqlite3.connect(tmp_path / "data" / "hayata.db") as db:
        db.execute("DELETE FROM hayata_events WHERE type = 'node_partial_result'")
    assert _wide_carried_on(tmp_path / "data", counts, "wide-lost", config) \
        == WIDE_CARRIED_ON
