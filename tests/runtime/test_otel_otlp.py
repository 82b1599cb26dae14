"""The telemetry guide's recipe (docs/guide/telemetry.md) end to end: every
actor process batches its spans to an OTLP/HTTP collector named by the
standard ``OTEL_EXPORTER_OTLP_*`` variables (here a small collector in the
test process that decodes what it receives)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import hayata_py as hy
from hayata_py import otel
from tests.helpers import eventually


class Collector(ThreadingHTTPServer):
    """Accepts OTLP/HTTP protobuf trace exports on ``/v1/traces``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.lock = threading.Lock()
        self.spans: list[dict[str, Any]] = []

    def add(self, request: ExportTraceServiceRequest) -> None:
        with self.lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value
                            for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append({
                            "name": span.name, "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex() or None,
                            "scope": scope_spans.scope.name, "service": resource.get(
                                "service.name"),
                            "attributes": {a.key: a.value for a in span.attributes}})

    def received(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.spans)


class _Receive(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ok = self.path == "/v1/traces"
        if ok:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.server.add(request)
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # ms between batches
    monkeypatch.setenv(otel.OPTIONS_ENV_VAR, "")
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_spans_reach_an_otlp_collector_from_every_actor_process(
        tmp_path: Path, collector: Collector) -> None:
    handlers = otel.handlers(setup="tests.otel_setup:otlp")
    with hy.AgentSystem(tmp_path / "data", telemetry_handlers=handlers) as system:
        agent = system.start_agent(hy.AgentConfig(
            "t", {"a": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
        result = agent.wait(agent.run({"steps": [["next", "a", {}], ["finish", 1]]}), 30)
        assert result.ok
        # Batches leave while the system runs: no shutdown needed to see them.
        required = {"invoke_agent t", "node a", "edge a"}  # and "reduce a" where reducers are
        spans = eventually(lambda: (s := collector.received())
                           and required <= {x["name"] for x in s} and s,
                           message=f"{required} at the collector")
    by = {s["name"]: s for s in spans}
    assert set(by) - {"reduce a"} == required and len(by) == len(spans)
    root = by["invoke_agent t"]
    assert root["trace_id"] == f"{otel.trace_id_for(result.invocation_id):032x}"
    assert root["parent_id"] is None
    assert by["node a"]["parent_id"] == root["span_id"]
    assert by["edge a"]["parent_id"] == by["node a"]["span_id"]
    assert by.get("reduce a", by["edge a"])["parent_id"] == by["node a"]["span_id"]
    assert {s["trace_id"] for s in spans} == {root["trace_id"]}
    assert {(s["service"], s["scope"]) for s in spans} == {("hayata-test", "hayata_py")}
    assert root["attributes"]["hayata.invocation_id"].string_value == result.invocation_id
