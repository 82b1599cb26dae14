"""The reducer: collects the edge results of an execution into one outcome.

One reducer per node, reused across executions. It owns the execution's
deadline (a single pending timer, re-armed for the earliest deadline): if
edges are still pending when it fires, the outcome is ``execution_timeout``
naming them. Results that arrive before the node's :class:`Expect`
(message order between different actors is not guaranteed) wait in a buffer.

When an execution has a single edge, the edge sends the agent the outcome
itself (``EdgeResult.delivered``, sent without the value) and the reducer
only keeps the books: the deadline, :class:`ReducerDone` for the node,
telemetry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from thespian.actors import WakeupMessage

from hayata_py import _telemetry as telemetry
from hayata_py._actors._protocol import EdgeResult, Expect, Forget, Outcome, ReducerDone
from hayata_py._errors import ErrorInfo
from supervisors import SupervisedActor

_MAX_EARLY = 64


@dataclass
class _Pending:
    expect: Expect
    node: Any
    span: telemetry.Span
    deadline: float
    results: dict[str, EdgeResult] = field(default_factory=dict)


class ReducerActor(SupervisedActor):
    """Consolidates edge results for one node."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending: dict[str, _Pending] = {}
        self.early: dict[str, list[EdgeResult]] = {}
        self.timer_pending = False

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, EdgeResult):
            self._on_result(message)
        elif isinstance(message, Expect):
            span = telemetry.span_start(telemetry.REDUCER, {
                "agent_id": message.agent_id, "node_id": message.node_id,
                "execution_id": message.execution_id,
                "expected_edges": list(message.edge_ids)})
            entry = _Pending(message, sender, span, time.monotonic() + message.timeout)
            self.pending[message.execution_id] = entry
            self._arm_timer(entry.deadline)
            for result in self.early.pop(message.execution_id, []):
                self._on_result(result)
        elif isinstance(message, Forget):
            forgotten = self.pending.pop(message.execution_id, None)
            self.early.pop(message.execution_id, None)
            if forgotten is not None:
                self._stop(forgotten, "cancelled", tuple(
                    e for e in forgotten.expect.edge_ids if e not in forgotten.results))
        elif isinstance(message, WakeupMessage):
            self._on_timer()

    def _on_result(self, result: EdgeResult) -> None:
        entry = self.pending.get(result.execution_id)
        if entry is None:
            if len(self.early) >= _MAX_EARLY:
                self.early.pop(next(iter(self.early)))
            self.early.setdefault(result.execution_id, []).append(result)
            return
        if result.edge_id not in entry.expect.edge_ids:
            return
        entry.results[result.edge_id] = result
        failed = next((r for r in entry.results.values() if not r.ok), None)
        if failed is None and len(entry.results) < len(entry.expect.edge_ids):
            return
        del self.pending[result.execution_id]
        expect = entry.expect
        # The node first: on the reducer's path its edge is then free before the
        # agent schedules more work (on the direct path the agent has the
        # outcome already, and the node queues work until ReducerDone).
        pending = tuple(e for e in expect.edge_ids if e not in entry.results)
        error_class = None
        if failed is not None and failed.error is not None:
            error_class = failed.error.details.get("type")
        self.send(entry.node, ReducerDone(expect.execution_id, pending,
                                          "failed" if failed else "completed", error_class))
        if not (len(expect.edge_ids) == 1 and result.delivered):  # else the edge sent it
            self.send(expect.agent, self._outcome(entry, failed))
        self._stop(entry, "failed" if failed else "completed", pending)

    @staticmethod
    def _outcome(entry: _Pending, failed: EdgeResult | None) -> Outcome:
        expect = entry.expect
        partials = sum(r.partials for r in entry.results.values())
        if failed is not None:
            return Outcome(expect.execution_id, expect.node_id, False, error=failed.error,
                           partials=partials)
        ordered = [entry.results[e].result for e in expect.edge_ids]
        value = ordered[0] if len(ordered) == 1 else ordered
        return Outcome(expect.execution_id, expect.node_id, True, value, partials=partials)

    def _arm_timer(self, deadline: float) -> None:
        """At most one pending timer (Thespian stalls with many); since every
        new deadline is later than the pending ones, the earliest is enough."""
        if not self.timer_pending:
            self.timer_pending = True
            self.wakeupAfter(timedelta(seconds=max(0.0, deadline - time.monotonic())))

    def _on_timer(self) -> None:
        self.timer_pending = False
        now = time.monotonic()
        for execution_id in [e for e, p in self.pending.items() if p.deadline <= now]:
            self._on_deadline(execution_id)
        if self.pending:
            self._arm_timer(min(p.deadline for p in self.pending.values()))

    def _on_deadline(self, execution_id: Any) -> None:
        entry = self.pending.pop(execution_id, None)
        if entry is None:
            return
        expect = entry.expect
        pending = tuple(e for e in expect.edge_ids if e not in entry.results)
        error = ErrorInfo(
            "execution_timeout",
            f"node {expect.node_id!r} did not finish within {expect.timeout}s "
            f"(pending edges: {', '.join(pending)})",
            {"node_id": expect.node_id, "pending_edges": list(pending),
             "timeout": expect.timeout})
        self.send(entry.node, ReducerDone(expect.execution_id, pending, "timed_out"))
        self.send(expect.agent, Outcome(expect.execution_id, expect.node_id, False, error=error))
        self._stop(entry, "timed_out", pending)

    @staticmethod
    def _stop(entry: _Pending, status: str, pending: tuple[str, ...]) -> None:
        results = list(entry.results.values())
        telemetry.span_stop(entry.span, status, metadata={
            "result_count": sum(1 for r in results if r.ok),
            "error_count": sum(1 for r in results if not r.ok),
            "pending_edges": list(pending)})
