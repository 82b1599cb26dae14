"""An agent's results and the waits on them: a part of
:class:`~hayata_py._actors.ledger.Ledger`, which holds it beside the
invocations it writes.

A published result is kept in memory (the last :data:`RESULTS_KEPT` without
a store; with one, the last :data:`RESULTS_KEPT_DURABLE`: older ones are read
back from the store) and answers its waiters. ``GetResult`` and
``WaitResult`` are answered from memory or the store (:meth:`Results.answer`).
Invocations that ended on another system are found by asking the store:
unfinished ones another system recovered or abandoned (the ledger's
:meth:`~hayata_py._actors.ledger.Ledger.refresh`) and waited-for ones this
agent does not run (:meth:`Results.check_elsewhere`).
A wait on an unfinished invocation that nothing runs is answered with
``recovery_required``.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from hayata_py._actors.store_access import as_store_error
from hayata_py._errors import ErrorInfo
from hayata_py._rules import pauses
from hayata_py.messages import AgentResult, GetResult, ResultReply, WaitResult
from hayata_py.store import InvocationRecord, TaskStore

RESULTS_KEPT = 1000
"""Results kept in memory without a store (the only place they are)."""
RESULTS_KEPT_DURABLE = 32
"""With a store, older results are read back from it: the agent's memory stays flat."""


def stored_result(record: InvocationRecord) -> AgentResult:
    """The result of a finished invocation, as the store has it."""
    error = ErrorInfo.from_dict(record.error) if record.error else None
    return AgentResult(record.invocation_id, record.status == "completed", record.result,
                       error)


class Results:
    """The agent's recent results, who waits for which, and what ended elsewhere."""

    def __init__(self, agent_id: str, store: TaskStore | None, log: Any,
                 send: Callable[[Any, Any], None],
                 unfinished: Mapping[str, InvocationRecord]) -> None:
        self.agent_id = agent_id
        self.store = store
        self.log = log
        self.send = send
        self.unfinished = unfinished  # the ledger's: read here, never changed
        self.recent: OrderedDict[str, AgentResult] = OrderedDict()
        self.waiters: dict[str, list[tuple[Any, int]]] = {}
        # Waited-for invocations that this agent does not run (queued behind one
        # of its runs, or running on another system that took one over): the
        # store is asked now and then whether they have ended (check_elsewhere).
        self.elsewhere: set[str] = set()

    def publish(self, result: AgentResult) -> None:
        """Keep ``result`` (the last few) and answer its waiters."""
        self.recent[result.invocation_id] = result
        kept = RESULTS_KEPT if self.store is None else RESULTS_KEPT_DURABLE
        while len(self.recent) > kept:
            self.recent.popitem(last=False)
        for waiter, ref in self.waiters.pop(result.invocation_id, []):
            self.send(waiter, ResultReply(result.invocation_id, result, ref=ref))

    def forget(self, invocation_id: str) -> None:
        """The invocation's run ended without a result (it is unfinished again)."""
        self.recent.pop(invocation_id, None)

    def result_reply(self, invocation_id: str, running: bool) -> ResultReply:
        result = self.recent.get(invocation_id)
        held = self.unfinished.get(invocation_id)
        running = running or held is not None
        if held is not None and pauses.is_paused(held):
            return ResultReply(invocation_id, pauses.paused_result(held), known=True)
        if result is None and not running and self.store is not None:
            record = self.store.get_invocation(invocation_id)
            if record is not None and record.agent_id == self.agent_id:
                if record.status == "running":
                    return ResultReply(invocation_id, None, known=True)
                result = stored_result(record)
            elif record is None:
                queued = self.store.queued_run(invocation_id)
                if queued is not None and queued.agent_id == self.agent_id:
                    return ResultReply(invocation_id, None, known=True)
        return ResultReply(invocation_id, result, known=result is not None or running)

    def answer(self, message: GetResult | WaitResult, sender: Any, running: bool,
               recovering: bool = False) -> None:
        """Answer a result request now, or (a ``WaitResult`` on a running or queued
        invocation) once the invocation has ended. ``recovering``: ``auto_recover``
        has yet to look at the unfinished ones; a wait on one of them is held until
        it has (:meth:`release`). The ledger has refreshed what it holds first."""
        reply = self.result_reply(message.invocation_id, running)
        if isinstance(message, WaitResult) and reply.result is None:
            if message.invocation_id in self.unfinished and not recovering:
                reply = dataclasses.replace(reply, recovery_required=True)
            elif reply.known:
                self.waiters.setdefault(message.invocation_id, []).append(
                    (sender, message.ref))
                if not running:
                    self.elsewhere.add(message.invocation_id)
                return
        self.send(sender, dataclasses.replace(reply, ref=message.ref))

    def wait_for(self, invocation_id: str, sender: Any, ref: int) -> None:
        """Answer ``sender`` (with ``ref``) once the invocation, running or queued
        here, has ended: the wait of a ``Run(wait=True)``."""
        self.waiters.setdefault(invocation_id, []).append((sender, ref))

    def check_elsewhere(self, running: Mapping[str, Any]) -> None:
        """Answer the waits on invocations this agent does not run that have ended
        in the store (one read each; ``running``: what this agent runs now)."""
        if self.store is None:
            self.elsewhere.clear()
            return
        for invocation_id in list(self.elsewhere):
            if invocation_id not in self.waiters or invocation_id in running:
                self.elsewhere.discard(invocation_id)  # answered, or ours now
                continue
            try:
                record = self.store.get_invocation(invocation_id)
            except Exception as raw:  # noqa: BLE001 - the store is unreachable: later
                self.log.warning("store_unavailable", code=as_store_error(raw).code)
                return
            if record is not None and record.status != "running":
                self.elsewhere.discard(invocation_id)
                self.publish(stored_result(record))

    def release(self, invocation_ids: list[str]) -> None:
        """Answer the waits held for these unfinished invocations: nothing runs them."""
        for invocation_id in invocation_ids:
            for waiter, ref in self.waiters.pop(invocation_id, []):
                self.send(waiter, ResultReply(invocation_id, None, known=True, ref=ref,
                                              recovery_required=True))
