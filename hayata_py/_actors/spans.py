"""The telemetry spans of a running invocation, kept by the agent: the invocation's
and one per node execution (the node is off the step path, so the agent, which
sends each task and hears its outcome, times it)."""

from __future__ import annotations

from typing import Any

from hayata_py import _telemetry as telemetry
from hayata_py._errors import ErrorInfo


class InvocationSpans:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.invocation: telemetry.Span | None = None
        self.tasks: dict[str, telemetry.Span] = {}  # task id -> span

    def start(self, invocation_id: str, recovered: bool) -> None:
        metadata: dict[str, Any] = {"agent_id": self.agent_id, "invocation_id": invocation_id}
        if recovered:
            metadata["recovered"] = True
        self.invocation = telemetry.span_start(telemetry.AGENT_INVOCATION, metadata)

    def task_started(self, task_id: str, node_id: str, execution_id: str,
                     item: int | None = None) -> None:
        metadata: dict[str, Any] = {"agent_id": self.agent_id, "node_id": node_id,
                                    "execution_id": execution_id}
        if item is not None:  # a map step's item: a span of its own
            metadata["item"] = item
        self.tasks[task_id] = telemetry.span_start(telemetry.NODE_EXECUTION, metadata)

    def task_ended(self, task_id: str, error: ErrorInfo | None, status: str = "") -> None:
        span = self.tasks.pop(task_id, None)
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

    def ended(self, ok: bool, error: ErrorInfo | None, paused: bool = False) -> None:
        for task_id in list(self.tasks):
            self.task_ended(task_id, None, "failed")
        span, self.invocation = self.invocation, None
        if span is None:
            return
        if error is not None and error.code in ("policy_failed", "node_failed") \
                and "type" in error.details:
            telemetry.span_exception(span, str(error.details["type"]),
                                     metadata={"error_code": error.code})
            return
        status = "completed" if ok else "paused" if paused else (
            "timed_out" if error is not None and error.code == "execution_timeout"
            else "failed")
        telemetry.span_stop(span, status, metadata={"error_code": error.code} if error else None)
