"""The event -> span mapping, in one process: ids, parents, attributes, caller
context and sampling, through the real SDK (spans kept in memory)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanContext, StatusCode, TraceFlags

from hayata_py import otel
from hayata_py._otel import _handler, _plan
from tests import otel_setup

INV = ("hayata", "agent", "invocation")
NODE = ("hayata", "node", "execution")
EDGE = ("hayata", "edge")
CALLER_TRACE, CALLER_SPAN = 0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ReadableSpan]]:
    """The handler exporting to ``otel_setup.MEMORY`` in this process."""
    monkeypatch.setenv(otel.OPTIONS_ENV_VAR, "")
    otel.handlers(setup="tests.otel_setup:in_memory")
    _handler.reset()
    otel_setup.MEMORY.clear()
    yield otel_setup.MEMORY.get_finished_spans()  # type: ignore[misc]
    _handler.reset()
    otel_setup.MEMORY.clear()
    otel_setup.SAMPLER = None


def emit(prefix: tuple[str, ...], suffix: str, metadata: dict[str, Any],
         duration: int = 1000) -> None:
    measurements = {"system_time": 10**18} if suffix == "start" else {"duration": duration}
    otel.handle((*prefix, suffix), measurements, metadata, None)


def spans() -> dict[str, ReadableSpan]:
    out = {}
    for span in otel_setup.MEMORY.get_finished_spans():
        key = span.name + "".join(f" {k}={v}" for k, v in sorted((span.attributes or {}).items())
                                  if k in ("hayata.attempt", "hayata.item"))
        assert key not in out
        out[key] = span
    return out


def ids(span: ReadableSpan) -> tuple[int, int, int | None]:
    assert span.context is not None
    return (span.context.trace_id, span.context.span_id,
            span.parent.span_id if span.parent else None)


def node_md(inv: str, **extra: Any) -> dict[str, Any]:
    return {"agent_id": "t", "node_id": "n", "execution_id": f"{inv}:0", **extra}


def test_attempts_and_items_become_separate_spans_parented_right(
        memory: list[ReadableSpan]) -> None:
    inv = uuid.uuid4().hex
    for attempt in (1, 2):  # edges first: a child may be exported before its parent
        emit(EDGE, "exception", {**node_md(inv, attempt=attempt), "edge_id": "n.edge-1",
                                 "status": "failed", "class": "OSError"})
    for attempt in (1, 2):
        emit(NODE, "stop", node_md(inv, attempt=attempt, status="completed"))
    for item in (0, 1):
        emit(EDGE, "stop", {**node_md(inv, item=item), "edge_id": "n.edge-2",
                            "status": "completed"})
        emit(NODE, "stop", node_md(inv, item=item, status="completed"))
    emit(INV, "stop", {"agent_id": "t", "invocation_id": inv, "status": "completed"})
    got = spans()
    root = got["invoke_agent t"]
    assert ids(root) == (otel.trace_id_for(inv), _plan.span_id_for("invocation", inv, {}), None)
    nodes = [got[f"node n hayata.{k}={v}"] for k, v in
             (("attempt", 1), ("attempt", 2), ("item", 0), ("item", 1))]
    assert len({ids(n)[1] for n in nodes}) == 4
    for node in nodes:
        assert ids(node)[0] == otel.trace_id_for(inv) and ids(node)[2] == ids(root)[1]
    for key, node in zip((("attempt", 1), ("attempt", 2), ("item", 0), ("item", 1)), nodes,
                         strict=True):
        edge = got[f"edge n hayata.{key[0]}={key[1]}"]
        assert ids(edge)[2] == ids(node)[1]
        assert edge.attributes is not None and edge.attributes[f"hayata.{key[0]}"] == key[1]
    failed = got["edge n hayata.attempt=1"]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "OSError"


def test_a_start_seen_here_gives_the_exact_times(memory: list[ReadableSpan]) -> None:
    inv = uuid.uuid4().hex
    emit(NODE, "start", node_md(inv))
    emit(NODE, "stop", node_md(inv, status="completed"), duration=2500)
    (span,) = otel_setup.MEMORY.get_finished_spans()
    assert (span.start_time, span.end_time) == (10**18, 10**18 + 2500)


def test_a_stop_without_its_start_ends_when_the_handler_runs(
        memory: list[ReadableSpan]) -> None:
    import time
    before = time.time_ns()
    emit(NODE, "stop", node_md(uuid.uuid4().hex, status="completed"), duration=2500)
    (span,) = otel_setup.MEMORY.get_finished_spans()
    assert span.end_time is not None and span.start_time is not None
    assert before <= span.end_time <= time.time_ns()
    assert span.end_time - span.start_time == 2500


def test_user_data_keys_are_never_attributes(memory: list[ReadableSpan]) -> None:
    inv = uuid.uuid4().hex
    secret = "hunter2"
    emit(NODE, "exception", node_md(inv, status="failed", **{"class": "ValueError"},
                                    input=secret, result=secret, message=secret,
                                    traceback=secret, nested={"x": secret}))
    (span,) = otel_setup.MEMORY.get_finished_spans()
    assert secret not in span.to_json()
    assert span.attributes is not None and span.attributes["error.type"] == "ValueError"
    assert [e.name for e in span.events] == ["exception"]


def test_a_recovered_run_is_its_own_span_under_the_first_run(
        memory: list[ReadableSpan]) -> None:
    inv = uuid.uuid4().hex
    base = {"agent_id": "t", "invocation_id": inv}
    emit(INV, "stop", {**base, "status": "failed", "error_code": "invocation_interrupted"})
    emit(INV, "stop", {**base, "recovered": True, "status": "completed"})
    first, recovered = otel_setup.MEMORY.get_finished_spans()
    assert ids(first)[2] is None
    assert ids(recovered)[0] == ids(first)[0] and ids(recovered)[2] == ids(first)[1]
    assert ids(recovered)[1] != ids(first)[1]
    assert recovered.attributes is not None and recovered.attributes["hayata.recovered"]
    assert first.status.description == "invocation_interrupted"


def caller(sampled: bool = True) -> dict[str, str]:
    return {"traceparent": f"00-{CALLER_TRACE:032x}-{CALLER_SPAN:016x}-"
                           f"{'01' if sampled else '00'}", "tracestate": "vendor=1"}


def test_link_mode_links_the_invocation_to_its_caller(memory: list[ReadableSpan]) -> None:
    inv = uuid.uuid4().hex
    emit(NODE, "stop", node_md(inv, status="completed", **caller()))
    emit(INV, "stop", {"agent_id": "t", "invocation_id": inv, "status": "completed",
                       **caller()})
    node, root = otel_setup.MEMORY.get_finished_spans()
    assert ids(root) == (otel.trace_id_for(inv), ids(node)[2], None)
    (link,) = root.links
    assert (link.context.trace_id, link.context.span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert not node.links and ids(node)[0] == otel.trace_id_for(inv)
    assert root.attributes is not None and "hayata.traceparent" not in root.attributes


def test_parent_mode_nests_the_invocation_in_the_callers_trace(
        memory: list[ReadableSpan], monkeypatch: pytest.MonkeyPatch) -> None:
    otel.handlers(setup="tests.otel_setup:in_memory", caller_context="parent")
    _handler.reset()
    inv = uuid.uuid4().hex
    emit(EDGE, "stop", {**node_md(inv), "edge_id": "n.edge-1", "status": "completed",
                        **caller()})
    emit(NODE, "stop", node_md(inv, status="completed", **caller()))
    emit(INV, "stop", {"agent_id": "t", "invocation_id": inv, "status": "completed",
                       **caller()})
    edge, node, root = otel_setup.MEMORY.get_finished_spans()
    assert ids(root) == (CALLER_TRACE, _plan.span_id_for("invocation", inv, {}), CALLER_SPAN)
    assert root.parent is not None and root.parent.trace_state.get("vendor") == "1"
    assert not root.links
    assert ids(node)[0] == ids(edge)[0] == CALLER_TRACE
    assert ids(node)[2] == ids(root)[1] and ids(edge)[2] == ids(node)[1]
    # A caller that did not sample: nothing of the invocation is recorded.
    emit(INV, "stop", {"agent_id": "t", "invocation_id": uuid.uuid4().hex,
                       "status": "completed", **caller(sampled=False)})
    assert len(otel_setup.MEMORY.get_finished_spans()) == 3


def test_ratio_sampling_keeps_or_drops_whole_traces(memory: list[ReadableSpan]) -> None:
    otel_setup.SAMPLER = ParentBased(TraceIdRatioBased(0.5))
    _handler.reset()
    invocations = [uuid.uuid4().hex for _ in range(60)]
    for inv in invocations:  # each node span made before its root, as across processes
        emit(NODE, "stop", node_md(inv, status="completed"))
        emit(INV, "stop", {"agent_id": "t", "invocation_id": inv, "status": "completed"})
    kept: dict[int, list[str]] = {}
    for span in otel_setup.MEMORY.get_finished_spans():
        assert span.context is not None
        kept.setdefault(span.context.trace_id, []).append(span.name)
    assert 0 < len(kept) < len(invocations)  # 2**-60 odds of failing by chance
    assert all(sorted(names) == ["invoke_agent t", "node n"] for names in kept.values())


def test_trace_context_is_the_current_span_for_a_run() -> None:
    parent = SpanContext(CALLER_TRACE, CALLER_SPAN, is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(parent)))
    try:
        carried = otel.trace_context()
    finally:
        otel_context.detach(token)
    assert carried == {"traceparent": f"00-{CALLER_TRACE:032x}-{CALLER_SPAN:016x}-01"}
    assert otel.trace_context() == {}  # no current span


def test_events_that_name_no_invocation_or_level_make_no_span() -> None:
    assert _plan.plan_span((*NODE, "stop"), {"duration": 1},
                           {"node_id": "n", "execution_id": "no-step"}, 5) is None
    assert _plan.plan_span(("hayata", "other", "stop"), {}, {"invocation_id": "i"}, 5) is None
    assert _plan.plan_span((*NODE, "start"), {}, node_md("i"), 5) is None
    reducer = _plan.plan_span(("hayata", "reducer", "stop"), {"duration": 1},
                              {"invocation_id": "i", "status": "completed"}, 5)
    assert reducer is not None and reducer.span_id is None  # unnamed: under the root
    assert reducer.parent_span_id == _plan.span_id_for("invocation", "i", {})


def test_trace_ids_suit_ratio_samplers_where_uuid4s_would_not() -> None:
    invocations = [uuid.uuid4().hex for _ in range(200)]
    low_half = (1 << 63)
    # A uuid4's low 64 bits are never below 2**63 (its variant bits): a ratio
    # sampler at 50% would keep none of them. The derived trace ids spread evenly.
    assert not any(int(inv, 16) & (2**64 - 1) < low_half for inv in invocations)
    kept = sum(otel.trace_id_for(inv) & (2**64 - 1) < low_half for inv in invocations)
    assert 60 < kept < 140  # ~1e-8 odds of failing by chance


def test_node_events_name_their_invocation_by_their_execution_id() -> None:
    inv = uuid.uuid4().hex
    assert _plan.invocation_of({"execution_id": f"{inv}:7"}) == inv
    assert _plan.invocation_of({"invocation_id": "x", "execution_id": "y:1"}) == "x"


@given(st.text(min_size=1), st.dictionaries(st.sampled_from(["execution_id", "node_id",
                                                             "attempt", "edge_id"]),
                                            st.one_of(st.text(), st.integers())))
def test_ids_are_valid_w3c_ids_and_deterministic(invocation: str,
                                                 identity: dict[str, Any]) -> None:
    trace_id = otel.trace_id_for(invocation)
    span_id = otel.span_id_for("node", invocation, identity)
    assert 0 < trace_id < 2**128 and 0 < span_id < 2**64
    assert span_id == otel.span_id_for("node", invocation, dict(reversed(identity.items())))
    assert span_id != otel.span_id_for("edge", invocation, identity)


@pytest.mark.parametrize("traceparent", [
    "garbage", f"00-{0:032x}-{CALLER_SPAN:016x}-01", f"00-{CALLER_TRACE:032x}-{0:016x}-01",
    f"ff-{CALLER_TRACE:032x}-{CALLER_SPAN:016x}-01", 42])
def test_a_malformed_traceparent_is_ignored(memory: list[ReadableSpan],
                                            traceparent: object) -> None:
    inv = uuid.uuid4().hex
    emit(INV, "stop", {"agent_id": "t", "invocation_id": inv, "status": "completed",
                       "traceparent": traceparent})
    (root,) = otel_setup.MEMORY.get_finished_spans()
    assert ids(root) == (otel.trace_id_for(inv), _plan.span_id_for("invocation", inv, {}),
                         None)
    assert not root.links
