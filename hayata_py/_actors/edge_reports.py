"""What an edge tells its agent of its tasks: each task's :class:`Outcome` (its
telemetry span closed), sent one by one or, for tasks that ended together, as
one :class:`Outcomes` per agent; and partial results (``ctx.streamer``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hayata_py import _telemetry as telemetry
from hayata_py._actor_messages import Outcome, Outcomes, Partial, RunTask
from hayata_py._codec import check_encodable
from hayata_py._errors import ErrorInfo, InvalidPartialResult, StaleExecution
from hayata_py._policy import NodeContext


@dataclass
class EdgeName:
    """Which edge this is (set by its node's ``EdgeInit``): its node, its id and
    the node function it runs."""

    node_id: str = ""
    edge_id: str = ""
    function: str = ""


class Streamer:
    """``ctx.streamer``: publishes a partial result while its task is still the
    edge's (``current()``); ``publish`` sends it (or hands it to the main thread)."""

    def __init__(self, edge_id: str, run: RunTask, current: Callable[[], bool],
                 publish: Callable[[Partial], None]) -> None:
        self._edge_id, self._run = edge_id, run
        self._current, self._publish = current, publish
        self.count = 0

    def __call__(self, partial: dict[str, Any]) -> None:
        execute = self._run
        if not self._current():
            raise StaleExecution(
                f"execution {execute.execution_id} of node {execute.node_id!r} has ended; "
                "its streamer can no longer publish",
                execution_id=execute.execution_id)
        if not isinstance(partial, dict):
            raise InvalidPartialResult(
                f"streamer takes a dict, got {type(partial).__name__}")
        check_encodable(partial, "partial")
        self.count += 1
        self._publish(Partial(execute.execution_id, execute.node_id, self._edge_id,
                              self.count, dict(partial), execute.item))


def context(execute: RunTask, streamer: Streamer | None) -> NodeContext:
    """The ``ctx`` a node function is called with for ``execute``."""
    return NodeContext(
        input=execute.input, state=MappingProxyType(execute.state), node_id=execute.node_id,
        invocation_id=execute.invocation_id, execution_id=execute.execution_id,
        task_id=execute.task_id, idempotency_key=execute.idempotency_key,
        streamer=streamer, item=execute.item, attempt=execute.attempt,
        thread=execute.thread)


@dataclass(frozen=True)
class Ran:
    """A task that ran; its end is not recorded yet."""

    execute: RunTask
    span: telemetry.Span
    result: Any
    error: ErrorInfo | None
    streamer: Streamer | None


class Reports:
    """The Outcomes of an edge's tasks; while a chain runs (:meth:`together`)
    they are kept and sent together at its end."""

    def __init__(self, name: EdgeName, send: Callable[[Any, Any], None]) -> None:
        self.name = name
        self.send = send
        self.kept: list[tuple[Any, Outcome]] | None = None

    def span(self, execute: RunTask) -> telemetry.Span:
        """The telemetry span of ``execute`` on this edge, started now."""
        return telemetry.span_start(telemetry.EDGE, {
            "agent_id": execute.agent_id, "node_id": execute.node_id,
            "execution_id": execute.execution_id, "edge_id": self.name.edge_id,
            **({} if execute.item is None else {"item": execute.item})})

    def outcome(self, execute: RunTask, span: telemetry.Span, result: Any,
                error: ErrorInfo | None, streamer: Streamer | None) -> Outcome:
        """Close the task's span; its Outcome."""
        if error is None:
            telemetry.span_stop(span, "completed")
        elif error.code == "node_failed" and "type" in error.details:
            telemetry.span_exception(span, str(error.details["type"]),
                                     metadata={"error_code": error.code})
        else:
            telemetry.span_stop(span, "failed", metadata={"error_code": error.code})
        partials = streamer.count if streamer else 0
        return Outcome(execute.execution_id, execute.task_id, execute.node_id,
                       self.name.edge_id, error is None, result, error, partials, execute.item)

    def report(self, execute: RunTask, span: telemetry.Span, result: Any,
               error: ErrorInfo | None, streamer: Streamer | None) -> None:
        """Close the task's span and send its Outcome (recorded before, by the
        caller); in a chain, keep it for the chain's end."""
        outcome = self.outcome(execute, span, result, error, streamer)
        if self.kept is not None:
            self.kept.append((execute.agent, outcome))
        else:
            self.send(execute.agent, outcome)

    @contextmanager
    def together(self) -> Iterator[None]:
        """Keep the Outcomes reported meanwhile; send them together at the end."""
        self.kept = []
        try:
            yield
        finally:
            kept, self.kept = self.kept, None
            self.send_all(kept)

    def send_all(self, outcomes: list[tuple[Any, Outcome]]) -> None:
        """Send (agent, Outcome) pairs: those for one agent as one message."""
        by_agent: dict[Any, tuple[Any, list[Outcome]]] = {}  # ActorAddress: unhashable
        for agent, outcome in outcomes:
            by_agent.setdefault(agent.addressDetails, (agent, []))[1].append(outcome)
        for agent, mine in by_agent.values():
            self.send(agent, mine[0] if len(mine) == 1 else Outcomes(tuple(mine)))
