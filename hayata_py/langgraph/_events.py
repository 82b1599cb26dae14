"""The ``events`` stream mode: LangChain's stream events (``astream_events``
version ``"v2"``) of a run, as LangGraph's server streams them.

A task's events (its node's ``on_chain_start``/``_stream``/``_end``, a chat
model's ``on_chat_model_*``, a tool's ``on_tool_*``, ...) are made in the
task's process by LangChain's own event handler, fed by the callbacks
LangGraph's runner raises there; each is sent as a stream chunk. The run's
own ``on_chain_start`` and ``on_chain_end`` (the graph's, whose ``run_id`` is
every task event's first parent) are made where the run is streamed
(:func:`run_started`, :func:`run_ended`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from langchain_core.tracers.event_stream import _AstreamEventsCallbackHandler

__all__ = ["EVENTS", "TaskEvents", "run_ended", "run_started"]

EVENTS = "events"
"""The stream mode's name."""


class TaskEvents(_AstreamEventsCallbackHandler):
    """LangChain's ``astream_events`` handler whose events go to ``emit`` as
    the task makes them, instead of to an in-process stream.

    Only the task's own thread emits (a stream chunk goes out from there at
    once); an event made on a thread the node started (a ``ToolNode`` calls
    its tools on a pool) waits for the task's thread's next event, or for
    :meth:`flush` at the task's end, so the events keep the order they were
    made in."""

    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        super().__init__()
        self._emit = emit
        self._owner = threading.get_ident()
        self._waiting: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _send(self, event: Any, event_type: str) -> None:
        if not self.root_event_filter.include_event(event, event_type):
            return
        with self._lock:
            self._waiting.append(dict(event))
        if threading.get_ident() == self._owner:
            self.flush()

    def flush(self) -> None:
        """Emit the events made so far (on the task's thread)."""
        with self._lock:
            ready, self._waiting = self._waiting, []
        for event in ready:
            self._emit(event)


def run_started(name: str, run_id: str, input: Any) -> dict[str, Any]:
    """The run's first event: the graph's chain starts with ``input``."""
    return {"event": "on_chain_start", "data": {"input": input}, "name": name, "tags": [],
            "run_id": run_id, "metadata": {}, "parent_ids": []}


def run_ended(name: str, run_id: str, output: Any) -> dict[str, Any]:
    """The run's last event: the graph's chain ends with ``output``."""
    return {"event": "on_chain_end", "data": {"output": output}, "name": name, "tags": [],
            "run_id": run_id, "metadata": {}, "parent_ids": []}
