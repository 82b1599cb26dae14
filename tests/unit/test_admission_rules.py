"""Admission decisions without processes (``hayata_py._rules.admission``): which
runs an agent refuses and why, when a recovery finds it full, and what a
refused create means (tables)."""

from __future__ import annotations

from typing import Any

import pytest

from hayata_py._errors import RunRejected, StoreError
from hayata_py._rules.admission import Created, agent_full, create_refused, run_refused
from hayata_py.messages import Run
from hayata_py.store._records import InvocationRecord

PAUSED = InvocationRecord("p" * 32, "a", "running", 1, {}, None,
                          paused={"kind": "policy", "payload": None, "nodes": []})
FREE: dict[str, Any] = {"has_store": True, "single": False, "paused": None,
                        "unfinished": None, "running": 0, "max_invocations": 4,
                        "first": None}


@pytest.mark.parametrize(("case", "run", "changes", "code", "details"), [
    ("room: let in", Run(1), {}, None, {}),
    ("a thread needs a store", Run(1, thread="t"), {"has_store": False},
     "invalid_option", {"field": "thread"}),
    ("no thread, no store: fine", Run(1), {"has_store": False}, None, {}),
    ("one at a time: a paused one waits for resume", Run(1),
     {"single": True, "paused": PAUSED, "unfinished": PAUSED.invocation_id, "max_invocations": 1},
     "agent_paused", {"invocation_id": PAUSED.invocation_id}),
    ("one at a time: an unfinished one waits for recovery", Run(1),
     {"single": True, "unfinished": "u" * 32, "max_invocations": 1},
     "recovery_required", {"invocation_id": "u" * 32}),
    ("many at a time: an unfinished one does not block", Run(1),
     {"unfinished": "u" * 32}, None, {}),
    ("one at a time: busy names the one running", Run(1),
     {"single": True, "running": 1, "max_invocations": 1, "first": "f" * 32},
     "agent_busy", {"invocation_id": "f" * 32, "running": 1, "max_invocations": 1}),
    ("many at a time: busy names the count", Run(1),
     {"running": 4, "first": "f" * 32}, "agent_busy", {"running": 4, "max_invocations": 4}),
    ("the thread's store refusal comes before busy", Run(1, thread="t"),
     {"has_store": False, "running": 4}, "invalid_option", {"field": "thread"}),
])
def test_run_refused(case: str, run: Run, changes: dict[str, Any], code: str | None,
                     details: dict[str, Any]) -> None:
    refused = run_refused("a", run, **{**FREE, **changes})
    if code is None:
        assert refused is None, case
        return
    assert isinstance(refused, RunRejected), case
    assert refused.code == code, case
    assert {k: refused.details.get(k) for k in details} == details, case


@pytest.mark.parametrize(("single", "running", "maximum", "code", "details"), [
    (True, 0, 1, None, {}),
    (False, 3, 4, None, {}),
    (True, 1, 1, "agent_busy", {"invocation_id": "f" * 32}),
    (False, 4, 4, "agent_busy", {"running": 4, "max_invocations": 4}),
])
def test_agent_full(single: bool, running: int, maximum: int, code: str | None,
                    details: dict[str, Any]) -> None:
    full = agent_full("a", single=single, running=running, max_invocations=maximum,
                      first="f" * 32 if running else None)
    if code is None:
        assert full is None
        return
    assert full is not None and full.code == code
    assert {k: full.details.get(k) for k in details} == details


@pytest.mark.parametrize(("multitask", "store_code", "expected"), [
    ("enqueue", "thread_busy", Created.ENQUEUE),
    ("reject", "thread_busy", "thread_busy"),
    ("enqueue", "thread_changed", "thread_busy"),
    ("reject", "thread_changed", "thread_busy"),
    ("reject", "store_unavailable", "store_unavailable"),
    ("enqueue", "store_unavailable", "store_unavailable"),
])
def test_create_refused(multitask: str, store_code: str, expected: Any) -> None:
    run = Run(1, thread="t", multitask=multitask)
    answer = create_refused("a", run, StoreError("no", code=store_code,
                                                 invocation_id="o" * 32))
    if expected is Created.ENQUEUE:
        assert answer is Created.ENQUEUE
        return
    assert isinstance(answer, RunRejected) and answer.code == expected
    if expected == "thread_busy":
        assert answer.details["invocation_id"] == "o" * 32
        assert answer.details["thread"] == "t"
