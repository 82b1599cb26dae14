"""hayata_py.otel's configuration: handlers(), its errors, and the per-process setup."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import hayata_py as hy
from hayata_py import otel
from hayata_py import telemetry as tm
from hayata_py._otel import _handler
from tests import otel_setup
from tests.unit.test_exports import isort_style


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(otel.OPTIONS_ENV_VAR, "")
    _handler.reset()
    yield
    _handler.reset()


def test_otel_exports() -> None:
    assert otel.__all__ == isort_style(otel.__all__)
    assert set(otel.__all__) == {
        "DISCRIMINATORS", "HANDLER_ID", "HIDDEN_KEYS", "OPTIONS_ENV_VAR", "SPAN_EVENTS",
        "handle", "handlers", "span_id_for", "trace_context", "trace_id_for"}


def test_handlers_is_a_telemetry_handlers_mapping(tmp_path: Path) -> None:
    mapping = otel.handlers(setup="tests.otel_setup:to_file", caller_context="parent")
    assert mapping == {"hayata.otel": ("hayata_py.otel:handle", list(otel.SPAN_EVENTS))}
    # Every span event of every level; hayata.node.retry is a point event (each
    # attempt is a node.execution span of its own), not exported as a span, and
    # so are the cache's hit and miss counts and the circuit breakers' changes.
    assert set(otel.SPAN_EVENTS) == {e for e in tm.EVENTS if e not in (
        ("hayata", "node", "retry"), ("hayata", "agent", "auto_recovery"),
        ("hayata", "cache", "hit"), ("hayata", "cache", "miss"),
        ("hayata", "circuit", "opened"), ("hayata", "circuit", "closed"))}
    assert json.loads(os.environ[otel.OPTIONS_ENV_VAR]) == {
        "setup": "tests.otel_setup:to_file", "caller_context": "parent"}
    assert _handler.read_options() == _handler.Options("tests.otel_setup:to_file", "parent")
    json.loads(tm.env_value(mapping))  # what AgentSystem accepts
    assert otel.handlers(setup=otel_setup.to_file)["hayata.otel"][0] == "hayata_py.otel:handle"
    assert json.loads(os.environ[otel.OPTIONS_ENV_VAR])["setup"] == "tests.otel_setup:to_file"


@pytest.mark.parametrize(("kwargs", "field", "says"), [
    ({"setup": "tests.nope:setup"}, "setup", "cannot import"),
    ({"setup": "tests.otel_setup:missing"}, "setup", "not found"),
    ({"setup": "tests.otel_setup"}, "setup", "package.module:function"),
    ({"setup": lambda: None}, "setup", "lambda"),
    ({"setup": 42}, "setup", "expected a function"),
    ({"caller_context": "child"}, "caller_context", "'link', 'parent'"),
    ({"exporter": "otlp"}, "exporter", "unknown option"),
])
def test_bad_options_are_refused_naming_the_field(kwargs: dict[str, object], field: str,
                                                  says: str) -> None:
    with pytest.raises(hy.ConfigError) as err:
        otel.handlers(**kwargs)  # type: ignore[arg-type]
    assert err.value.details["field"] == field
    assert says in str(err.value)
    assert os.environ[otel.OPTIONS_ENV_VAR] == ""  # nothing changed


def test_a_bad_setup_path_starts_no_system(tmp_path: Path) -> None:
    with pytest.raises(hy.ConfigError):
        hy.AgentSystem(tmp_path, telemetry_handlers=otel.handlers(setup="tests.nope:x"))
    assert not (tmp_path / "hayata.db").exists()


def test_setup_runs_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAYATA_TEST_OTEL", str(tmp_path / "spans.jsonl"))
    otel.handlers(setup="tests.otel_setup:to_file")
    first = _handler._current()
    assert _handler._current() is first and first.tracer is not None
    assert first.pid == os.getpid()


def test_a_setup_returning_something_else_is_an_error_naming_setup() -> None:
    otel.handlers(setup="tests.otel_setup:not_a_setup")
    with pytest.raises(hy.ConfigError) as err:
        otel.handle(("hayata", "edge", "stop"), {"duration": 1}, {}, None)
    assert err.value.details["field"] == "setup" and "returned str" in str(err.value)


def test_without_an_sdk_provider_spans_are_dropped_with_one_warning() -> None:
    otel.handlers()  # no setup, and this process has no SDK provider
    with capture_logs() as logs:
        for _ in range(3):
            otel.handle(("hayata", "node", "execution", "stop"), {"duration": 1},
                        {"execution_id": "i:0", "node_id": "n", "status": "completed"}, None)
    assert [e["event"] for e in logs] == ["otel_no_sdk_tracer_provider"]
