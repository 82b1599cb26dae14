"""Telemetry from real actor processes: names, measurements and metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py import _telemetry as telemetry
from tests.helpers import eventually

ALL = sorted(telemetry.EVENTS)


@pytest.fixture
def sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "telemetry.jsonl"
    monkeypatch.setenv("HAYATA_TEST_TELEMETRY", str(path))
    return path


def events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def names(rows: list[dict[str, Any]]) -> list[str]:
    return [".".join(r["event"][1:]) for r in rows]


def run(tmp_path: Path, steps: list[Any], handlers: dict[str, Any], **config: Any
        ) -> tuple[hy.AgentResult, Path]:
    with hy.AgentSystem(tmp_path / "data", telemetry_handlers=handlers) as system:
        agent = system.start_agent(hy.AgentConfig(
            "t", {n: "tests.graph_nodes:worker" for n in ("a", "b")},
            "tests.graph_nodes:scripted", **config))
        result = agent.wait(agent.run({"steps": steps}), 30)
    return result, tmp_path / "data"


def test_sequential_run_events(tmp_path: Path, sink: Path) -> None:
    result, _ = run(tmp_path, [["next", "a", {}], ["finish", 1]],
                    {"sink": ("tests.telemetry_sink:record", ALL)})
    assert result.ok
    rows = eventually(lambda: (r := events(sink)) and len(r) >= 6 and r, message="events")
    assert sorted(names(rows)) == sorted([
        "agent.invocation.start", "node.execution.start", "edge.start",
        "edge.stop", "node.execution.stop", "agent.invocation.stop"])
    by = {".".join(r["event"][1:]): r for r in rows}
    for start in ("agent.invocation.start", "node.execution.start", "edge.start"):
        assert isinstance(by[start]["measurements"]["system_time"], int)
    for stop in ("agent.invocation.stop", "node.execution.stop", "edge.stop"):
        assert by[stop]["measurements"]["duration"] > 0
        assert by[stop]["metadata"]["status"] == "completed"
    inv = by["agent.invocation.start"]["metadata"]["invocation_id"]
    assert by["agent.invocation.stop"]["metadata"] == {
        "agent_id": "t", "invocation_id": inv, "status": "completed"}
    execution = f"{inv}:0"
    assert by["node.execution.stop"]["metadata"] == {
        "agent_id": "t", "node_id": "a", "execution_id": execution, "status": "completed"}
    edge = by["edge.stop"]["metadata"]
    assert edge["node_id"] == "a" and edge["execution_id"] == execution
    assert edge["edge_id"].startswith("a.edge-") and edge["agent_id"] == "t"
    # Events come from the processes where things happen: the agent owns the
    # invocation and the node execution (the node is off the step path); the
    # edge runs the function. A sequential step starts no reducer.
    pids = {".".join(r["event"][1:]): r["pid"] for r in rows}
    assert pids["agent.invocation.start"] == pids["node.execution.stop"]
    assert pids["edge.start"] == pids["edge.stop"] != pids["agent.invocation.start"]
    assert len(set(pids.values())) == 2
    for row in rows:  # never results, inputs or messages in metadata
        assert not {"result", "input", "message", "traceback"} & set(row["metadata"])


def test_parallel_run_events(tmp_path: Path, sink: Path) -> None:
    result, _ = run(tmp_path, [["next", ["a", "b"], {}], ["finish", 1]],
                    {"sink": ("tests.telemetry_sink:record", ALL)})
    assert result.ok
    rows = eventually(lambda: (r := events(sink)) and len(r) >= 10 and r, message="events")
    counted = names(rows)
    assert "reducer.start" not in counted
    for name in ("node.execution.start", "node.execution.stop", "edge.start", "edge.stop"):
        assert counted.count(name) == 2, name
    nodes = {r["metadata"]["node_id"] for r in rows if r["event"][1] == "node"}
    assert nodes == {"a", "b"}


def test_failing_node_emits_exceptions_with_the_class_only(tmp_path: Path, sink: Path) -> None:
    result, _ = run(tmp_path, [["next", "a", {"raise": "secret detail"}]],
                    {"sink": ("tests.telemetry_sink:record", ALL)})
    assert result.error is not None and result.error.code == "node_failed"
    rows = eventually(lambda: (r := events(sink)) and len(r) >= 6 and r, message="events")
    by = {".".join(r["event"][1:]): r for r in rows}
    for name in ("edge.exception", "node.execution.exception", "agent.invocation.exception"):
        assert by[name]["metadata"]["class"] == "RuntimeError"
        assert by[name]["metadata"]["error_code"] == "node_failed", name
        assert by[name]["metadata"]["status"] == "failed"
        assert "secret detail" not in json.dumps(by[name])


def test_timeout_is_reported_as_timed_out(tmp_path: Path, sink: Path) -> None:
    result, _ = run(tmp_path, [["next", "a", {"sleep": 5}]],
                    {"sink": ("tests.telemetry_sink:record", ALL)}, execution_timeout=0.3)
    assert result.error is not None and result.error.code == "execution_timeout"
    rows = eventually(lambda: (r := events(sink))
                      and "agent.invocation.stop" in names(r) and r)
    by = {".".join(r["event"][1:]): r for r in rows}
    assert result.error.details["pending_nodes"] == ["a"]
    assert by["node.execution.stop"]["metadata"]["status"] == "timed_out"
    assert by["agent.invocation.stop"]["metadata"]["status"] == "timed_out"
    assert "edge.stop" not in by  # the edge was killed mid-task


def test_a_raising_handler_is_detached_and_the_run_succeeds(tmp_path: Path, sink: Path) -> None:
    result, data = run(tmp_path, [["next", "a", {}], ["finish", 2]],
                       {"bomb": ("tests.telemetry_sink:explode", ALL),
                        "sink": ("tests.telemetry_sink:record", ALL)})
    assert result.ok and result.result == 2
    assert len(events(sink)) == 6  # the healthy handler saw everything
    log = (data / "hayata.log.jsonl").read_text()
    assert "telemetry_handler_detached" in log


def test_bad_handler_path_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(hy.ConfigError) as err:
        hy.AgentSystem(tmp_path, telemetry_handlers={"h": ("tests.nope:missing", ALL)})
    assert "h" in str(err.value)


def test_a_run_that_pauses_stops_its_span_as_paused_not_failed(tmp_path: Path,
                                                              sink: Path) -> None:
    """A pause is not a failure: its invocation span must not turn into an error."""
    with hy.AgentSystem(tmp_path / "data", telemetry_handlers={
            "sink": ("tests.telemetry_sink:record", ALL)}) as system:
        agent = system.start_agent(hy.AgentConfig(
            "p", {"draft": "tests.hitl_nodes:flaky", "send": "tests.hitl_nodes:flaky"},
            "tests.hitl_nodes:approve"))
        result = agent.wait(agent.run({"effects": str(tmp_path / "effects")}), 30)
        assert result.status == "paused"
        rows = eventually(lambda: [r for r in events(sink)
                                   if ".".join(r["event"][1:]) == "agent.invocation.stop"],
                          message="the invocation span stopped")
    assert rows[0]["metadata"]["status"] == "paused"


def test_the_log_has_one_info_line_per_invocation_end_with_its_duration(
        tmp_path: Path) -> None:
    """At the default level the agent's own ``invocation_ended`` line says how
    long the invocation took; the built-in handler's invocation start and
    completed stop lines are debug lines, not written."""
    result, data = run(tmp_path, [["next", "a", {}], ["finish", 1]], {})
    assert result.ok
    log = data / "hayata.log.jsonl"

    def ended() -> list[dict[str, Any]]:
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        return [r for r in rows if r.get("invocation_id") == result.invocation_id]

    rows = eventually(lambda: (r := ended()) and any(
        x["event"] == "invocation_ended" for x in r) and r, message="invocation_ended logged")
    line = next(r for r in rows if r["event"] == "invocation_ended")
    assert line["ok"] is True and isinstance(line["duration_ms"], float)
    assert 0 < line["duration_ms"] < 30_000
    assert [r["event"] for r in rows if r["event"].startswith("hayata.agent.invocation")] == []
    assert [r["event"] for r in rows if r["event"] == "invocation_started"] == [
        "invocation_started"]
