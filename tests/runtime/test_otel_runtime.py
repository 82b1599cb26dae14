"""OpenTelemetry spans exported from real actor processes (each with its own
SDK provider, set up by ``tests.otel_setup:to_file``).

The assertions hold whichever actor emits an event (today a node actor times
its executions and reducers report; a leaner core may time executions in the
agent and have no reducers): each terminal telemetry event, recorded by a
second handler, must be exactly one span, placed by its ids."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py import otel
from hayata_py import telemetry as tm
from tests import otel_setup
from tests.helpers import eventually

SECRET = "s3cr3t-do-not-export"
ALL = sorted(tm.EVENTS)
NAMES = {("agent", "invocation"): "invoke_agent {agent_id}",
         ("node", "execution"): "node {node_id}", ("edge",): "edge {node_id}",
         ("reducer",): "reduce {node_id}"}


@pytest.fixture
def spans_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "spans.jsonl"
    monkeypatch.setenv("HAYATA_TEST_OTEL", str(path))
    monkeypatch.setenv("HAYATA_TEST_TELEMETRY", str(tmp_path / "events.jsonl"))
    monkeypatch.setenv(otel.OPTIONS_ENV_VAR, "")  # restored after the test
    return path


def run(tmp_path: Path, steps: list[Any], required: list[str],
        setup: str = "tests.otel_setup:to_file", **config: Any
        ) -> tuple[hy.AgentResult, list[dict[str, Any]]]:
    """Runs ``steps``; waits, while the system still runs, for the ``required``
    span names (a node's span may end after its invocation's); returns the
    result and, after shutdown, every span exported, checked one per event."""
    handlers = {**otel.handlers(setup=setup), "sink": ("tests.telemetry_sink:record", ALL)}
    path = Path(os.environ["HAYATA_TEST_OTEL"])
    with hy.AgentSystem(tmp_path / "data", telemetry_handlers=handlers) as system:
        agent = system.start_agent(hy.AgentConfig(
            "t", {n: "tests.graph_nodes:worker" for n in ("a", "b")},
            "tests.graph_nodes:scripted", **config))
        result = agent.wait(agent.run({"steps": steps, "secret": SECRET}), 30)
        eventually(lambda: not Counter(required) - Counter(
            s["name"] for s in otel_setup.read(path)), message=f"spans {required}")
    spans = otel_setup.read(path)
    assert Counter(s["name"] for s in spans) == Counter(expected_names(tmp_path))
    return result, spans


def expected_names(tmp_path: Path) -> list[str]:
    """The span name of each terminal event the telemetry sink recorded."""
    rows = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    return [NAMES[tuple(r["event"][1:-1])].format(**r["metadata"]) for r in rows
            if r["event"][-1] in ("stop", "exception")]


def reducers_under_their_nodes(shape: dict[str, Any], spans: list[dict[str, Any]]) -> None:
    """Reducer spans, where the runtime has reducers, are children of their node's span."""
    nodes = {s["span_id"]: s for s in spans if s["name"].startswith("node ")}
    for reducer in (s for s in spans if s["name"].startswith("reduce ")):
        node = nodes[reducer["parent_id"]]
        for key in ("hayata.node_id", "hayata.execution_id"):
            assert reducer["attributes"][key] == node["attributes"][key]


def tree(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """Checks the spans form one trace with one root; returns the root and
    each span's children by span id."""
    assert len({s["trace_id"] for s in spans}) == 1
    assert len({s["span_id"] for s in spans}) == len(spans)
    ids = {s["span_id"] for s in spans}
    roots = [s for s in spans if s["parent_id"] is None]
    assert len(roots) == 1, roots
    for span in spans:
        assert span is roots[0] or span["parent_id"] in ids, span  # no dangling parent
        assert span["kind"] == "INTERNAL" and span["sampled"]
        assert span["start"] <= span["end"]
        assert int(span["trace_id"], 16) and int(span["span_id"], 16)  # valid W3C ids
    children: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        children.setdefault(span["parent_id"], []).append(span)
    return {"root": roots[0], "children": children}


def test_a_three_step_invocation_is_one_trace(tmp_path: Path, spans_file: Path) -> None:
    result, spans = run(tmp_path, [["next", "a", {}], ["next", "b", {}], ["next", "a", {}],
                                   ["finish", 1]],
                        ["invoke_agent t", "node a", "node b", "node a", "edge a", "edge b",
                         "edge a"])
    assert result.ok
    shape = tree(spans)
    root = shape["root"]
    assert root["name"] == "invoke_agent t" and root["status"] == "UNSET"
    assert root["trace_id"] == f"{otel.trace_id_for(result.invocation_id):032x}"
    assert root["attributes"] == {
        "hayata.agent_id": "t", "hayata.invocation_id": result.invocation_id,
        "hayata.status": "completed", "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "t"}
    nodes = sorted(shape["children"][root["span_id"]], key=lambda s: s["start"])
    assert [(n["name"], n["attributes"]["hayata.execution_id"]) for n in nodes] == [
        ("node a", f"{result.invocation_id}:0"), ("node b", f"{result.invocation_id}:1"),
        ("node a", f"{result.invocation_id}:2")]
    for node in nodes:
        assert node["parent_remote"]  # its parent was made in the agent's process
        assert node["attributes"] == {
            "hayata.agent_id": "t", "hayata.invocation_id": result.invocation_id,
            "hayata.node_id": node["name"][-1], "hayata.status": "completed",
            "hayata.execution_id": node["attributes"]["hayata.execution_id"]}
        below = {s["name"]: s for s in shape["children"][node["span_id"]]}
        assert set(below) - {f"reduce {node['name'][-1]}"} == {f"edge {node['name'][-1]}"}
        edge = below[f"edge {node['name'][-1]}"]
        assert edge["pid"] != node["pid"]  # the edge runs in another process
        assert edge["attributes"]["hayata.execution_id"] == \
            node["attributes"]["hayata.execution_id"]
        assert edge["attributes"]["hayata.edge_id"].startswith(node["name"][-1] + ".edge-")
        reducer = below.get(f"reduce {node['name'][-1]}")
        if reducer is not None:
            assert reducer["attributes"]["hayata.expected_edges"] == [
                edge["attributes"]["hayata.edge_id"]]
            assert reducer["attributes"]["hayata.result_count"] == 1
        assert node["start"] <= edge["start"] and edge["end"] <= node["end"]
    # A node's span may end after the agent moved on (a node actor hears of its
    # edge's result from its reducer), so steps are ordered by their edges' ends.
    edges = [next(s for s in shape["children"][n["span_id"]] if s["name"].startswith("edge"))
             for n in nodes]
    assert edges[0]["end"] <= nodes[1]["start"] and edges[1]["end"] <= nodes[2]["start"]
    assert root["start"] <= nodes[0]["start"] and edges[2]["end"] <= root["end"]
    assert len({s["pid"] for s in spans}) >= 3  # the agent's, and each edge's
    setups = Path(f"{spans_file}.setups").read_text().split()
    assert len(setups) == len(set(setups))  # setup ran once per process...
    assert {str(s["pid"]) for s in spans} <= set(setups)  # ...in each that exported
    assert SECRET not in spans_file.read_text()


def test_a_parallel_invocation_has_sibling_node_spans(tmp_path: Path,
                                                      spans_file: Path) -> None:
    result, spans = run(tmp_path, [["next", ["a", "b"], {}], ["finish", 2]],
                        ["invoke_agent t", "node a", "node b", "edge a", "edge b"])
    assert result.ok
    shape = tree(spans)
    reducers_under_their_nodes(shape, spans)
    nodes = shape["children"][shape["root"]["span_id"]]
    assert sorted(n["name"] for n in nodes) == ["node a", "node b"]
    assert {n["attributes"]["hayata.execution_id"] for n in nodes} == {
        f"{result.invocation_id}:0"}
    for node in nodes:
        below = shape["children"][node["span_id"]]
        node_id = node["attributes"]["hayata.node_id"]
        assert {s["name"] for s in below} - {f"reduce {node_id}"} == {f"edge {node_id}"}
        assert all(s["attributes"]["hayata.node_id"] == node_id for s in below)


def test_a_failed_node_is_an_error_span_and_no_secret_leaks(tmp_path: Path,
                                                            spans_file: Path) -> None:
    result, spans = run(tmp_path, [["next", "a", {"raise": f"boom {SECRET}", "note": SECRET}]],
                        ["invoke_agent t", "node a", "edge a"])
    assert result.error is not None and result.error.code == "node_failed"
    shape = tree(spans)
    reducers_under_their_nodes(shape, spans)
    by = {s["name"]: s for s in spans}
    root = shape["root"]
    assert root["status"] == "ERROR" and root["description"] == "node_failed"
    assert root["attributes"]["hayata.error_code"] == "node_failed"
    assert root["attributes"]["error.type"] == "RuntimeError"
    for name in ("node a", "edge a"):
        span = by[name]
        assert span["status"] == "ERROR", name
        assert span["attributes"]["error.type"] == "RuntimeError"
        assert span["attributes"]["hayata.error_code"] == "node_failed", name
        assert span["attributes"]["hayata.status"] == "failed"
        assert span["events"] == [{"name": "exception",
                                   "attributes": {"exception.type": "RuntimeError"}}]
    if "reduce a" in by:
        assert by["reduce a"]["attributes"]["hayata.error_count"] == 1
        assert by["reduce a"]["status"] == "ERROR"
        assert by["reduce a"]["attributes"]["hayata.status"] == "failed"
    text = spans_file.read_text()
    assert SECRET not in text and "boom" not in text
    assert all(SECRET not in json.dumps(s) for s in spans)


def test_a_timed_out_node_is_an_error_span(tmp_path: Path, spans_file: Path) -> None:
    result, spans = run(tmp_path, [["next", "a", {"sleep": 5}]], ["invoke_agent t", "node a"],
                        execution_timeout=0.3)
    assert result.error is not None and result.error.code == "execution_timeout"
    by = {s["name"]: s for s in spans}
    assert set(by) - {"reduce a"} == {"invoke_agent t", "node a"}  # the edge was killed
    reducers_under_their_nodes(tree(spans), spans)
    assert by["node a"]["status"] == "ERROR"
    assert by["node a"]["attributes"]["error.type"] == "timed_out"
    assert by["invoke_agent t"]["description"] == "execution_timeout"
    if "reduce a" in by:
        assert by["reduce a"]["attributes"]["hayata.pending_edges"] != []


def test_a_setup_that_raises_detaches_the_handler_and_the_run_succeeds(
        tmp_path: Path, spans_file: Path) -> None:
    handlers = otel.handlers(setup="tests.otel_setup:failing")
    with hy.AgentSystem(tmp_path / "data", telemetry_handlers=handlers) as system:
        agent = system.start_agent(hy.AgentConfig(
            "t", {"a": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
        result = agent.wait(agent.run({"steps": [["next", "a", {}], ["finish", 3]]}), 30)
    assert result.ok and result.result == 3
    log = (tmp_path / "data" / "hayata.log.jsonl").read_text()
    assert "telemetry_handler_detached" in log and "hayata.otel" in log
    assert not spans_file.exists()
