"""The telemetry spans of the agent's running invocations: each invocation's and
one per node execution (the node is off the step path, so the agent, which
sends each task and hears its outcome, times it). Kept per invocation, so
ending one touches only its own spans."""

from __future__ import annotations

import time
from typing import Any

from hayata_py import _telemetry as telemetry
from hayata_py._errors import ErrorInfo


class InvocationSpans:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.invocations: dict[str, telemetry.Span] = {}  # invocation id -> span
        self.tasks: dict[str, dict[str, telemetry.Span]] = {}  # iid -> task id -> span

    def start(self, invocation_id: str, recovered: bool, automatic: bool = False) -> None:
        metadata: dict[str, Any] = {"agent_id": self.agent_id, "invocation_id": invocation_id}
        if recovered:
            metadata["recovered"] = True
        if automatic:
            metadata["auto_recovered"] = True
        self.invocations[invocation_id] = telemetry.span_start(telemetry.AGENT_INVOCATION,
                                                               metadata)

    def task_started(self, invocation_id: str, task_id: str, node_id: str,
                     execution_id: str, item: int | None = None) -> None:
        metadata: dict[str, Any] = {"agent_id": self.agent_id, "node_id": node_id,
                                    "execution_id": execution_id}
        if item is not None:  # a map step's item: a span of its own
            metadata["item"] = item
        self.tasks.setdefault(invocation_id, {})[task_id] = telemetry.span_start(
            telemetry.NODE_EXECUTION, metadata)

    def task_ended(self, invocation_id: str, task_id: str, error: ErrorInfo | None,
                   status: str = "") -> None:
        span = self.tasks.get(invocation_id, {}).pop(task_id, None)
        if span is None:
            return
        code = {"error_code": error.code} if error is not None else None
        if error is not None and "type" in error.details:
            telemetry.span_exception(span, str(error.details["type"]), "failed", code)
        else:
            telemetry.span_stop(span, status or ("failed" if error else "completed"), code)

    def retrying(self, retry: Any) -> None:
        """``hayata.node.retry``: a task waits ``delay`` s for its next attempt."""
        error = retry.error
        telemetry.execute(telemetry.NODE_RETRY, {"delay": retry.seconds}, {
            "agent_id": self.agent_id, "node_id": retry.key.node_id,
            "execution_id": retry.execution_id, "attempt": retry.attempt,
            "error_code": error.code if error else None,
            "error_type": error.details.get("type") if error else None,
            **({} if retry.key.item is None else {"item": retry.key.item})})

    def ended(self, invocation_id: str, ok: bool, error: ErrorInfo | None,
              paused: bool = False) -> float | None:
        """Stop the invocation's span (and any task span still open); the
        invocation's duration in milliseconds (None: it had no span)."""
        for task_id in list(self.tasks.get(invocation_id, {})):
            self.task_ended(invocation_id, task_id, None, "failed")
        self.tasks.pop(invocation_id, None)
        span = self.invocations.pop(invocation_id, None)
        if span is None:
            return None
        took = round((time.monotonic_ns() - span.started) / 1e6, 3)
        if error is not None and error.code in ("policy_failed", "node_failed") \
                and "type" in error.details:
            telemetry.span_exception(span, str(error.details["type"]),
                                     metadata={"error_code": error.code})
            return took
        status = "completed" if ok else "paused" if paused else (
            "timed_out" if error is not None and error.code == "execution_timeout"
            else "failed")
        telemetry.span_stop(span, status, metadata={"error_code": error.code} if error else None)
        return took
