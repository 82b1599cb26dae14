"""The telemetry registry: attach/detach/execute, spans, env transport, the log handler."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

import hayata_py as hy
from hayata_py import telemetry

NODE_STOP = ("hayata", "node", "execution", "stop")
CALLS: list[tuple[Any, ...]] = []


def record(event: Any, measurements: Any, metadata: Any, config: Any) -> None:
    """A handler importable by path: remembers every call."""
    CALLS.append((event, measurements, metadata, config))


def explode(event: Any, measurements: Any, metadata: Any, config: Any) -> None:
    raise RuntimeError("handler bug")


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(telemetry.ENV_VAR, raising=False)
    for info in telemetry.list_handlers():
        telemetry.detach(info.id)
    CALLS.clear()
    yield
    for info in telemetry.list_handlers():
        telemetry.detach(info.id)


def test_known_events_are_hayatas() -> None:
    suffixes = ("start", "stop", "exception")
    expected = {("hayata", "agent", "invocation", s) for s in suffixes}
    expected |= {("hayata", "node", "execution", s) for s in suffixes}
    expected |= {("hayata", "edge", s) for s in suffixes}
    expected |= {("hayata", "reducer", "start"), ("hayata", "reducer", "stop")}
    expected |= {("hayata", "node", "retry"), ("hayata", "agent", "auto_recovery")}
    expected |= {("hayata", "cache", "hit"), ("hayata", "cache", "miss")}
    expected |= {("hayata", "circuit", "opened"), ("hayata", "circuit", "closed")}
    assert expected == telemetry.EVENTS


def test_execute_calls_handler_with_event_measurements_metadata_config() -> None:
    telemetry.attach("h", [NODE_STOP], record, config={"k": 1})
    telemetry.execute(NODE_STOP, {"duration": 5}, {"node_id": "n"})
    telemetry.execute(("hayata", "edge", "stop"), {"duration": 1}, {})
    assert CALLS == [(NODE_STOP, {"duration": 5}, {"node_id": "n"}, {"k": 1})]


def test_handler_by_path_is_imported_lazily() -> None:
    telemetry.attach("p", [NODE_STOP], "tests.unit.test_telemetry:record")
    telemetry.execute(NODE_STOP, {}, {"a": 1})
    assert CALLS == [(NODE_STOP, {}, {"a": 1}, None)]


def test_detach_and_list_handlers() -> None:
    telemetry.attach("a", [NODE_STOP], record)
    telemetry.attach("b", [("hayata", "edge", "start")], record)
    assert [h.id for h in telemetry.list_handlers()] == ["a", "b"]
    assert [h.id for h in telemetry.list_handlers(("hayata", "edge"))] == ["b"]
    assert telemetry.detach("a") is True
    assert telemetry.detach("a") is False
    telemetry.execute(NODE_STOP, {}, {})
    assert CALLS == []


def test_attach_twice_is_refused() -> None:
    telemetry.attach("a", [NODE_STOP], record)
    with pytest.raises(hy.HayataError) as err:
        telemetry.attach("a", [NODE_STOP], record)
    assert err.value.code == "handler_exists"


@pytest.mark.parametrize("handler", [explode, "tests.unit.test_telemetry:missing"])
def test_failing_handler_is_detached_and_logged(handler: Any) -> None:
    telemetry.attach("bad", [NODE_STOP], handler)
    telemetry.attach("good", [NODE_STOP], record)
    with capture_logs() as logs:
        telemetry.execute(NODE_STOP, {"duration": 1}, {})
        telemetry.execute(NODE_STOP, {"duration": 2}, {})
    assert [h.id for h in telemetry.list_handlers()] == ["good"]
    assert [c[1]["duration"] for c in CALLS] == [1, 2]
    failures = [entry for entry in logs if entry["event"] == "telemetry_handler_detached"]
    assert len(failures) == 1
    assert failures[0]["handler_id"] == "bad"
    assert failures[0]["telemetry_event"] == "hayata.node.execution.stop"
    assert failures[0]["log_level"] == "error"


def test_span_start_and_stop_measurements_and_metadata() -> None:
    prefix = ("hayata", "node", "execution")
    telemetry.attach("h", [(*prefix, s) for s in ("start", "stop", "exception")], record)
    before = time.time_ns()
    span = telemetry.span_start(prefix, {"agent_id": "a", "node_id": "n", "execution_id": "e"})
    telemetry.span_stop(span, "completed")
    (start, start_m, start_md, _), (stop, stop_m, stop_md, _) = CALLS
    assert start == (*prefix, "start")
    assert set(start_m) == {"system_time"}
    assert before <= start_m["system_time"] <= time.time_ns()
    assert start_md == {"agent_id": "a", "node_id": "n", "execution_id": "e"}
    assert stop == (*prefix, "stop")
    assert set(stop_m) == {"duration"}
    assert isinstance(stop_m["duration"], int) and stop_m["duration"] >= 0
    assert stop_md == {**start_md, "status": "completed"}


def test_span_exception_carries_class_not_message() -> None:
    prefix = ("hayata", "edge")
    telemetry.attach("h", [(*prefix, "exception")], record)
    span = telemetry.span_start(prefix, {"edge_id": "x"})
    telemetry.span_exception(span, ValueError("secret input"), "failed")
    [(event, measurements, metadata, _)] = CALLS
    assert event == ("hayata", "edge", "exception")
    assert set(measurements) == {"duration"}
    assert metadata == {"edge_id": "x", "status": "failed", "class": "ValueError"}
    assert "secret" not in repr(metadata)


def test_reducer_stop_extra_metadata() -> None:
    telemetry.attach("h", [("hayata", "reducer", "stop")], record)
    span = telemetry.span_start(("hayata", "reducer"), {"expected_edges": 2})
    telemetry.span_stop(span, "timed_out", {"result_count": 1, "error_count": 0,
                                            "pending_edges": 1})
    assert CALLS[0][2] == {"expected_edges": 2, "status": "timed_out", "result_count": 1,
                           "error_count": 0, "pending_edges": 1}


def test_env_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    value = telemetry.env_value({
        "rec": ("tests.unit.test_telemetry:record", [NODE_STOP, ("hayata", "edge", "start")]),
        "fn": (record, [("hayata", "reducer", "stop")]),
    })
    assert json.loads(value) == {
        "fn": ["tests.unit.test_telemetry:record", [["hayata", "reducer", "stop"]]],
        "rec": ["tests.unit.test_telemetry:record",
                [["hayata", "node", "execution", "stop"], ["hayata", "edge", "start"]]],
    }
    monkeypatch.setenv(telemetry.ENV_VAR, value)
    assert sorted(telemetry.install_from_env(force=True)) == ["fn", "rec"]
    assert telemetry.install_from_env() == []  # once per process
    assert telemetry.install_from_env(force=True) == []  # already attached: kept
    telemetry.execute(("hayata", "edge", "start"), {"system_time": 1}, {"edge_id": "e"})
    assert CALLS == [(("hayata", "edge", "start"), {"system_time": 1}, {"edge_id": "e"}, None)]


def test_execute_installs_env_handlers_in_a_fresh_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hayata_py import _telemetry

    monkeypatch.setenv(telemetry.ENV_VAR, telemetry.env_value(
        {"rec": ("tests.unit.test_telemetry:record", [NODE_STOP])}))
    monkeypatch.setattr(_telemetry, "_installed_pid", os.getpid() + 1)  # as after a fork
    telemetry.execute(NODE_STOP, {"duration": 3}, {})
    assert CALLS == [(NODE_STOP, {"duration": 3}, {}, None)]


def test_malformed_env_is_logged_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(telemetry.ENV_VAR, "{not json")
    with capture_logs() as logs:
        assert telemetry.install_from_env(force=True) == []
    assert logs[0]["event"] == "telemetry_env_invalid"


@pytest.mark.parametrize(("entry", "words"), [
    (("tests.unit.test_telemetry:nope", [NODE_STOP]), "not found"),
    (("no_such_module_xyz:f", [NODE_STOP]), "cannot import"),
    (("not a path", [NODE_STOP]), "package.module:function"),
    (("tests.unit.test_telemetry:record", [("hayata", "bogus")]), "unknown event"),
    (("tests.unit.test_telemetry:record", ["hayata.node"]), "tuple of strings"),
    (("tests.unit.test_telemetry:record", []), "at least one event"),
    ("tests.unit.test_telemetry:record", "expected"),
])
def test_env_value_rejects_bad_handlers_naming_them(entry: Any, words: str) -> None:
    with pytest.raises(hy.ConfigError) as err:
        telemetry.env_value({"my_handler": entry})
    assert err.value.details["field"] == "telemetry_handlers['my_handler']"
    assert words in str(err.value)


@pytest.fixture
def info_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """The lines structlog logs meanwhile, info level included, whatever an
    earlier test in this process left configured.

    ``capture_logs`` swaps only the processors: a filtering wrapper left at
    ``warning`` (what ``supervisors._log`` configures for a system started
    without a log file) drops info lines before they reach it, so these tests
    failed whenever such a test had run before them in the same pytest worker.
    The fixture starts from that state (so a test that forgot the level fails
    every time, not by test order), sets ``info``, and restores the level.
    """
    saved = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=saved)


def test_log_event_logs_name_measurements_and_metadata(
        info_logs: list[MutableMapping[str, Any]]) -> None:
    telemetry.log_event(NODE_STOP, {"duration": 7},
                        {"node_id": "n", "status": "failed", "event": "x"}, None)
    assert info_logs == [{"event": "hayata.node.execution.stop", "duration": 7,
                          "node_id": "n", "status": "failed", "event_": "x",
                          "log_level": "info"}]


@pytest.mark.parametrize(("event", "metadata", "debug_only"), [
    (NODE_STOP, {"status": "completed"}, True),
    (("hayata", "edge", "start"), {}, True),
    (("hayata", "cache", "hit"), {}, True),
    (("hayata", "edge", "stop"), {"status": "cancelled"}, False),
    (("hayata", "edge", "exception"), {"status": "failed"}, False),
    (("hayata", "agent", "invocation", "stop"), {"status": "completed"}, True),
    (("hayata", "agent", "invocation", "start"), {}, True),
    (("hayata", "agent", "invocation", "stop"), {"status": "failed"}, False),
    (("hayata", "agent", "invocation", "stop"), {"status": "paused"}, False),
    (("hayata", "agent", "invocation", "exception"), {"status": "failed"}, False),
])
def test_a_tasks_or_invocations_start_and_successful_stop_are_logged_at_debug_only(
        event: tuple[str, ...], metadata: dict[str, Any], debug_only: bool) -> None:
    saved = structlog.get_config()["wrapper_class"]
    try:
        for level in (logging.INFO, logging.DEBUG):
            structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))
            with capture_logs() as logs:
                telemetry.log_event(event, {"duration": 1}, dict(metadata), None)
            expected = [] if debug_only and level == logging.INFO else [
                ("debug" if debug_only else "info", ".".join(event))]
            assert [(e["log_level"], e["event"]) for e in logs] == expected
    finally:
        structlog.configure(wrapper_class=saved)


def test_log_event_is_attachable_by_path(info_logs: list[MutableMapping[str, Any]]) -> None:
    telemetry.attach("log", [NODE_STOP], "hayata_py._telemetry:log_event")
    telemetry.execute(NODE_STOP, {"duration": 1}, {"agent_id": "a", "status": "timed_out"})
    assert [(e["event"], e["agent_id"]) for e in info_logs] == [
        ("hayata.node.execution.stop", "a")]
