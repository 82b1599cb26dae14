"""The reducer: a temporary process that consolidates one map step's results.

Its node starts it (the node is its parent and supervisor) when the agent
opens a map step (:class:`StartReducer`) and replaces it if it dies before
it answered. The agent forwards each completed item's result to it as it
arrives (:class:`ItemResult`); once the machine has every item it asks for
consolidation (:class:`ConsolidateItems`). The reducer takes every item it was
not sent (it is a replacement, or the items were completed before a crash
and reused by ``recover()``) from the items' durable ``completed`` records,
runs the step's ``reduce`` function on the results in item order, if there
is one, and answers the agent :class:`ReducerAnswer`; then it asks its node to
stop it (:class:`ReducerDone`). It decides nothing about the step: the
invocation machine ends it, once.

User code (``reduce``) runs here; nothing it raises reaches Thespian.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from hayata_py import _telemetry as telemetry
from hayata_py._actor_messages import (
    ConsolidateItems,
    ItemResult,
    ReducerAnswer,
    ReducerDone,
    ReducerUp,
    StartReducer,
)
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.store_access import as_store_error, store_for
from hayata_py._callables import resolve_callable
from hayata_py._codec import check_encodable
from hayata_py._errors import EncodingError, ErrorInfo
from supervisors import SupervisedActor


def consolidate(start: StartReducer, received: Mapping[int, Any],
                recorded: Callable[[], Mapping[str, Any]]) -> ReducerAnswer:
    """The step's result from the items' results (``received`` by item index; the
    rest from ``recorded()``: task id -> completed result), with ``reduce`` run
    on them in item order if the step has one. Pure but for ``reduce`` itself."""
    missing = [i for i in range(len(start.task_ids)) if i not in received]
    stored: Mapping[str, Any] = {}
    if missing:
        try:
            stored = recorded()
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            return ReducerAnswer(start.execution_id, False, error=ErrorInfo(
                exc.code, f"the reducer could not read the items' records: {exc}",
                {"node_id": start.node_id}))
    results: list[Any] = []
    for item, task_id in enumerate(start.task_ids):
        if item in received:
            results.append(received[item])
        elif task_id in stored:
            results.append(stored[task_id])
        else:
            return ReducerAnswer(start.execution_id, False, error=ErrorInfo(
                "reduce_failed", f"item {item} of map step {start.execution_id} has no "
                "recorded result", {"node_id": start.node_id, "item": item}))
    if start.reduce is None:
        return ReducerAnswer(start.execution_id, True, results)
    details = {"node_id": start.node_id, "reduce": start.reduce}
    try:
        value = resolve_callable(start.reduce)(results)
    except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
        return ReducerAnswer(start.execution_id, False, error=ErrorInfo(
            "reduce_failed", f"reduce {start.reduce} raised {type(exc).__name__}: {exc}",
            {**details, "type": type(exc).__name__}))
    if not isinstance(value, dict):
        return ReducerAnswer(start.execution_id, False, error=ErrorInfo(
            "reduce_invalid_result", f"reduce {start.reduce} returned "
            f"{type(value).__name__}; a reduce function must return a dict",
            {**details, "returned": type(value).__name__}))
    try:
        check_encodable(value, "result")
    except EncodingError as exc:
        return ReducerAnswer(start.execution_id, False, error=ErrorInfo(
            "reduce_invalid_result", f"reduce {start.reduce} returned a value that cannot "
            f"be stored: {exc}", {**details, **exc.details, "returned": "dict"}))
    return ReducerAnswer(start.execution_id, True, value)


class ReducerActor(SupervisedActor):
    """Consolidates one map step (child of the step's node, started per step)."""

    start: StartReducer | None = None
    answer: ReducerAnswer | None = None

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, StartReducer):
            self.start, self.node, self.results = message, sender, {}
            self.span = telemetry.span_start(telemetry.REDUCER, {
                "agent_id": message.agent_id, "node_id": message.node_id,
                "execution_id": message.execution_id,
                "expected_items": len(message.task_ids)})
            self.send(sender, ReducerUp(message.execution_id, os.getpid()))
            return
        start = self.start
        if start is None or getattr(message, "execution_id", None) != start.execution_id:
            return
        if isinstance(message, ItemResult):
            self.results[message.item] = message.result
        elif isinstance(message, ConsolidateItems):
            if self.answer is None:
                self.answer = self._consolidate(start, message)
            self.send(start.agent, self.answer)
            self.send(self.node, ReducerDone(start.execution_id))

    def _consolidate(self, start: StartReducer, message: ConsolidateItems) -> ReducerAnswer:
        received: dict[int, Any] = dict(self.results)
        if message.results is not None:
            received = dict(enumerate(message.results))

        def recorded() -> dict[str, Any]:
            store = store_for(start.store_url)
            return {t.task_id: t.result for t in store.get_tasks(
                start.invocation_id, execution_id=start.execution_id)
                if t.status == "completed"}

        answer = consolidate(start, received, recorded)
        metadata: dict[str, Any] = {"result_count": len(start.task_ids) if answer.ok else 0,
                                    "received_items": len(self.results)}
        if answer.error is not None:
            metadata["error_code"] = answer.error.code
        telemetry.span_stop(self.span, "completed" if answer.ok else "failed",
                            metadata=metadata)
        return answer
