"""The agent's durable side: its store, its unfinished invocation, its results.

Everything the agent writes goes through here, each write one committed
transaction carrying the invocation's fencing token: the invocation record
(before ``RunAccepted``), the checkpoint of a map step or of one that cannot be
placed (before any of its tasks is sent; any other step's rides on its
``RunTask`` messages and is committed by the edges with ``started``:
:meth:`Ledger.foldable`), the terminal result (before anyone is told), lease
renewals. A
refused write comes back as a ``WriteRefused`` event for the machine, marked
``fenced`` when another system owns the invocation now.

It also answers what the store knows: the status, results of earlier
invocations, and the recovery requests (``recover``, ``resolve_task``,
``abandon``) on an unfinished invocation found at start.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from hayata_py._actors import pauses
from hayata_py._actors.boundary import validate_run
from hayata_py._actors.durable import as_store_error, store_for
from hayata_py._actors.maps import resume_map
from hayata_py._actors.recovering import resume_step, waiting_node
from hayata_py._codec import check_encodable
from hayata_py._config import AgentSpec
from hayata_py._errors import (
    EncodingError,
    ErrorInfo,
    InvocationBusy,
    RecoveryRejected,
    RunRejected,
    StaleWriter,
    StoreError,
)
from hayata_py._invocation import (
    Checkpoint,
    CheckpointSaved,
    Dispatch,
    Event,
    RecordResult,
    Resume,
    WriteRefused,
)
from hayata_py.messages import (
    Abandon,
    Ack,
    AgentResult,
    AgentStatus,
    GetResult,
    ResolveTask,
    ResultReply,
    Run,
    WaitResult,
)
from hayata_py.store import (
    ActiveExecution,
    InvocationRecord,
    TaskStore,
)

RESULTS_KEPT = 1000
"""Results kept in memory without a store (the only place they are)."""
RESULTS_KEPT_DURABLE = 32
"""With a store, older results are read back from it: the agent's memory stays flat."""


def stored_result(record: InvocationRecord) -> AgentResult:
    """The result of a finished invocation, as the store has it."""
    error = ErrorInfo.from_dict(record.error) if record.error else None
    return AgentResult(record.invocation_id, record.status == "completed", record.result,
                       error)


def _refused(raw: Exception) -> WriteRefused:
    exc = as_store_error(raw)
    return WriteRefused(ErrorInfo(exc.code, str(exc), dict(exc.details)),
                        fenced=isinstance(exc, StaleWriter))


def _refusal(exc: StoreError, record: InvocationRecord) -> RecoveryRejected:
    """A store's refusal (busy, unavailable, ...) as recover()'s answer."""
    return RecoveryRejected(str(exc), code=exc.code, invocation_id=record.invocation_id)


class Ledger:
    """The agent's store access, its unfinished invocation and its recent results."""

    def __init__(self, spec: AgentSpec, log: Any, send: Callable[[Any, Any], None]) -> None:
        self.spec = spec
        self.log = log
        self.send = send
        self.owner = spec.owner or spec.instance
        self.store: TaskStore | None = store_for(spec.store_url) if spec.store_url else None
        self.results: OrderedDict[str, AgentResult] = OrderedDict()
        self.waiters: dict[str, list[tuple[Any, int]]] = {}
        # An unfinished invocation in the store: this agent (or system) died
        # while running it. It waits for recover(), resolve or abandon.
        self.recovering: InvocationRecord | None = (
            self.store.unfinished_invocation(spec.id) if self.store else None)
        if self.recovering is not None:
            self.log.warning("recovery_required", invocation_id=self.recovering.invocation_id)

    # -- writes of a running invocation ------------------------------------------------

    def create(self, invocation_id: str, input: Any, state: dict[str, Any]) -> int:
        """Record a new invocation; its fencing token (raises a StoreError)."""
        if self.store is None:
            return 0
        try:
            return self.store.create_invocation(
                InvocationRecord(invocation_id, self.spec.id, "running", 0, state, input),
                owner=self.owner, lease_seconds=self.spec.lease_seconds)
        except Exception as raw:
            raise as_store_error(raw) from raw

    def record_of(self, invocation_id: str, input: Any, cp: Checkpoint,
                  paused: dict[str, Any] | None = None) -> InvocationRecord:
        active = None if cp.execution_id is None else ActiveExecution(
            cp.execution_id, cp.step, cp.nodes, cp.input, cp.parallel, cp.map, cp.reduce)
        return InvocationRecord(invocation_id, self.spec.id, "running", cp.step, cp.state,
                                input, active, cp.parallel_results, cp.last_result,
                                paused=paused)

    def checkpoint(self, invocation_id: str, token: int, input: Any, cp: Checkpoint,
                   paused: dict[str, Any] | None = None) -> WriteRefused | None:
        """Commit a checkpoint (``paused``: with a pause in it: see ``pauses.py``)."""
        if self.store is None:
            return None
        try:
            self.store.save_checkpoint(self.record_of(invocation_id, input, cp, paused),
                                       token=token)
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            return _refused(raw)
        return None

    def save_step(self, invocation_id: str, token: int, input: Any, cp: Checkpoint,
                  unplaced: dict[str, str]) -> tuple[Checkpoint | None, Event]:
        """The machine's ``SaveCheckpoint``: fold it onto the step's tasks
        (:meth:`foldable`; returned, to ride on each ``RunTask``) or commit it now.
        Returns (the folded checkpoint or None, the answer for the machine)."""
        if self.foldable(cp, unplaced):  # committed by the step's edges, with `started`
            return cp, CheckpointSaved(dict(unplaced))
        refused = self.checkpoint(invocation_id, token, input, cp)
        return None, refused or CheckpointSaved(dict(unplaced))

    def foldable(self, cp: Checkpoint, unplaced: dict[str, str]) -> bool:
        """Whether the step's checkpoint is left to its tasks' edges: not written
        here, it rides on every ``RunTask`` of the step and each edge commits it
        together with its ``started`` record (:meth:`folded_record`). A map step's
        is written here, before any of its items is sent, and so is one that the
        machine will keep for recover() because a node of it cannot be placed."""
        return (self.store is not None and not getattr(cp, "map", False)
                and not any(n in unplaced for n in cp.nodes))

    def folded_record(self, invocation_id: str, folded: Checkpoint | None, task: Dispatch
                      ) -> InvocationRecord | None:
        """The checkpoint that rides on ``task``'s ``RunTask``, if its step's was folded.

        Every task of the step and every attempt of one carries it, so whichever
        edge records a ``started`` for the step commits the checkpoint with it.
        Its state is the task's (the same content): one object, pickled once.
        The input column is never rewritten by a checkpoint, so it is left out."""
        if folded is None or folded.execution_id != task.execution_id:
            return None
        return self.record_of(invocation_id, None, dataclasses.replace(folded, state=task.state))

    def finish(self, invocation_id: str, token: int, record: RecordResult
               ) -> WriteRefused | None:
        """Commit the terminal result before anyone is told."""
        if self.store is None:
            return None
        try:
            self.store.finish_invocation(
                invocation_id, token=token, status="completed" if record.ok else "failed",
                result=record.result,
                error=record.error.to_dict() if record.error else None, state=record.state)
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            self.log.error("finish_refused", invocation_id=invocation_id,
                           code=as_store_error(raw).code)
            return _refused(raw)
        return None

    def renew(self, invocation_id: str, token: int) -> bool | None:
        """Extend the lease: True done, False lost to another owner, None a hiccup
        (try again soon)."""
        assert self.store is not None
        try:
            self.store.renew_lease(invocation_id, owner=self.owner, token=token,
                                   lease_seconds=self.spec.lease_seconds)
        except (StaleWriter, InvocationBusy):
            self.log.error("ownership_lost", invocation_id=invocation_id)
            return False
        except Exception as raw:  # noqa: BLE001 - a store hiccup: try again soon
            self.log.warning("lease_renewal_failed", invocation_id=invocation_id,
                             code=as_store_error(raw).code)
            return None
        return True

    def keep(self, invocation_id: str, fallback: InvocationRecord) -> None:
        """A run ended without a durable result: the invocation is unfinished in the
        store and the agent reports ``recovery_required`` (unless it ended elsewhere)."""
        self.results.pop(invocation_id, None)  # not its result: recover() makes that
        assert self.store is not None
        try:
            record = self.store.get_invocation(invocation_id)
        except Exception as raw:  # noqa: BLE001 - the store is unreachable right now
            self.log.error("store_unavailable", invocation_id=invocation_id,
                           code=as_store_error(raw).code)
            record = fallback  # what we know; re-read on the next request
        if record is not None and record.status == "running":
            self.recovering = record

    # -- results ---------------------------------------------------------------------

    def publish(self, result: AgentResult) -> None:
        """Keep ``result`` (the last few) and answer its waiters."""
        self.results[result.invocation_id] = result
        kept = RESULTS_KEPT if self.store is None else RESULTS_KEPT_DURABLE
        while len(self.results) > kept:
            self.results.popitem(last=False)
        for waiter, ref in self.waiters.pop(result.invocation_id, []):
            self.send(waiter, ResultReply(result.invocation_id, result, ref=ref))

    def refresh_recovering(self) -> None:
        """Forget an unfinished invocation that has ended meanwhile (another system
        recovered or abandoned it): keep its stored result, answer its waiters."""
        record = self.recovering
        if record is None or self.store is None:
            return
        try:
            now = self.store.get_invocation(record.invocation_id)
        except Exception as raw:  # noqa: BLE001 - keep what we know; report later
            self.log.warning("store_unavailable", code=as_store_error(raw).code)
            return
        if now is not None and now.status == "running":
            # The store's record, not what this process guessed when it could not
            # read it (keep()'s fallback has no active execution once the machine
            # cancelled the step): recover() classifies the step the store names.
            self.recovering = now
            return
        self.recovering = None
        self.log.info("unfinished_invocation_ended_elsewhere",
                      invocation_id=record.invocation_id)
        if now is not None:
            self.publish(stored_result(now))

    def result_reply(self, invocation_id: str, running: bool) -> ResultReply:
        result = self.results.get(invocation_id)
        running = running or (self.recovering is not None
                              and self.recovering.invocation_id == invocation_id)
        held = pauses.paused(self)
        if held is not None and held.invocation_id == invocation_id:
            return ResultReply(invocation_id, pauses.paused_result(held), known=True)
        if result is None and not running and self.store is not None:
            record = self.store.get_invocation(invocation_id)
            if record is not None and record.agent_id == self.spec.id:
                if record.status == "running":
                    return ResultReply(invocation_id, None, known=True)
                result = stored_result(record)
        return ResultReply(invocation_id, result, known=result is not None or running)

    def refuse(self, run: Run, running: str | None) -> RunRejected | None:
        """Why ``run`` cannot start now (bad, an unfinished invocation waits for
        recovery, the agent is busy with ``running``), or None."""
        rejected = validate_run(run)
        self.refresh_recovering()
        held = pauses.paused(self)
        if rejected is None and held is not None:
            rejected = pauses.refuse_run(self.spec.id, held)
        if rejected is None and self.recovering is not None:
            rejected = RunRejected(
                f"agent {self.spec.id!r} has an unfinished invocation "
                f"{self.recovering.invocation_id}; call recover(), resolve_task() or "
                "abandon() first", code="recovery_required",
                invocation_id=self.recovering.invocation_id)
        if rejected is None and running is not None:
            rejected = RunRejected(f"agent {self.spec.id!r} is running invocation "
                                   f"{running}", code="agent_busy", invocation_id=running)
        return rejected

    def status(self, running: str | None) -> AgentStatus:
        """The agent's status; ``running`` is the id of the invocation it runs."""
        self.refresh_recovering()
        idempotent = tuple(sorted(self.spec.idempotent_nodes))
        if self.recovering is not None:
            return AgentStatus(self.spec.id, "paused" if pauses.paused(self) else
                               "recovery_required", self.recovering.invocation_id,
                               idempotent_nodes=idempotent)
        return AgentStatus(self.spec.id, "running" if running else "idle", running,
                           idempotent_nodes=idempotent)

    def answer(self, message: GetResult | WaitResult, sender: Any, running: str | None
               ) -> None:
        """Answer a result request now, or (a ``WaitResult`` on a running
        invocation) once the invocation has ended."""
        is_running = running == message.invocation_id
        if isinstance(message, WaitResult):
            self.refresh_recovering()
        reply = self.result_reply(message.invocation_id, is_running)
        if isinstance(message, WaitResult) and reply.result is None:
            if self.recovering is not None \
                    and self.recovering.invocation_id == message.invocation_id:
                reply = dataclasses.replace(reply, recovery_required=True)
            elif reply.known:
                self.waiters.setdefault(message.invocation_id, []).append(
                    (sender, message.ref))
                return
        self.send(sender, dataclasses.replace(reply, ref=message.ref))

    # -- recovery ------------------------------------------------------------------------

    def _claim(self, record: InvocationRecord) -> int:
        assert self.store is not None
        return self.store.claim_invocation(record.invocation_id, owner=self.owner,
                                           lease_seconds=self.spec.lease_seconds)

    def nothing(self) -> RecoveryRejected:
        return RecoveryRejected(f"agent {self.spec.id!r} has no unfinished invocation",
                                code="nothing_to_recover")

    def recover(self, unplaced: Mapping[str, str] | None = None
                ) -> RecoveryRejected | tuple[InvocationRecord, int, Resume]:
        """Claim the unfinished invocation and classify its interrupted step.

        A step that needs the user's decision (an uncertain task), or that has a
        task to run on a node no system can run now (``unplaced``: node id ->
        why), is refused before the claim: a refused recovery writes nothing, so
        a live edge of the step (the agent alone died) can still record its
        result, and the invocation waits for a later ``recover()``."""
        self.refresh_recovering()
        record = self.recovering
        if record is None or self.store is None:
            return self.nothing()
        if pauses.is_paused(record):
            return pauses.refuse_recover(record)
        try:
            # Someone else's live lease first: it may still be running the step.
            self.store.check_claimable(record.invocation_id, owner=self.owner)
            early = self._classify(record)
        except (InvocationBusy, StoreError) as exc:
            return _refusal(exc, record)
        if isinstance(early, RecoveryRejected):
            return early
        waiting = waiting_node(early, unplaced or {})
        if waiting is not None:
            node_id, why = waiting
            return RecoveryRejected(
                f"node {node_id!r} of the interrupted step has no system to run on "
                f"({why}); the invocation is kept: call recover() again once a system "
                "that satisfies the node's placement has joined",
                code="waiting_for_placement", invocation_id=record.invocation_id,
                node_id=node_id, reason=why)
        try:
            # Claim first: from here on no older writer (an orphan edge of a dead
            # system) can record anything, so the classification below is final.
            token = self._claim(record)
            # What the store holds now that no one else can write.
            record = self.store.get_invocation(record.invocation_id) or record
            resumed = self._classify(record)
        except (InvocationBusy, StoreError) as exc:
            return _refusal(exc, record)
        if isinstance(resumed, RecoveryRejected):
            return resumed
        self.recovering = None
        return record, token, resumed

    def _classify(self, record: InvocationRecord) -> RecoveryRejected | Resume:
        assert self.store is not None
        active = record.active_execution
        if active is None:
            return Resume()
        records = self.store.get_tasks(record.invocation_id, execution_id=active.execution_id)
        if active.map:
            return resume_map(record, active, records, self.spec.idempotent_nodes,
                              self.spec.retry.get(active.node_ids[0]))
        return resume_step(record, active, records, self.spec.idempotent_nodes,
                           self.spec.retry, time.time())

    def resolve(self, message: ResolveTask) -> Any:
        self.refresh_recovering()
        record = self.recovering
        if record is None or self.store is None:
            return self.nothing()
        task = self.store.get_task(message.task_id)
        active = record.active_execution
        if task is None or active is None or task.execution_id != active.execution_id:
            return RecoveryRejected(
                f"task {message.task_id!r} is not a task of the unfinished invocation's "
                "current step", code="task_not_found", task_id=message.task_id)
        result: Any = message.result
        if not isinstance(result, dict):
            return RecoveryRejected("a task result must be a dict (as a node returns)",
                                    code="invalid_result", task_id=message.task_id)
        try:
            # Check before claiming: a claim is a write (a new fencing token), and
            # a result the store cannot hold must change nothing.
            check_encodable(result, "result")
        except EncodingError as exc:
            return RecoveryRejected(str(exc), code=exc.code, task_id=message.task_id)
        try:
            token = self._claim(record)
            self.store.resolve_task(message.task_id, result=message.result, token=token)
        except (StoreError, EncodingError) as exc:
            return RecoveryRejected(str(exc), code=exc.code, task_id=message.task_id)
        self.log.info("task_resolved", task_id=message.task_id)
        return Ack(message.task_id)

    def abandon(self, message: Abandon) -> Any:
        self.refresh_recovering()
        record = self.recovering
        if record is None or self.store is None:
            return self.nothing()
        if record.invocation_id != message.invocation_id:
            return RecoveryRejected(
                f"the unfinished invocation is {record.invocation_id}, not "
                f"{message.invocation_id}", code="not_found")
        error = ErrorInfo("abandoned", "the invocation was abandoned by the user", {})
        try:
            token = self._claim(record)
            self.store.finish_invocation(record.invocation_id, token=token, status="failed",
                                         error=error.to_dict())
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            return RecoveryRejected(str(exc), code=exc.code)
        self.recovering = None
        self.publish(AgentResult(record.invocation_id, False, None, error))
        self.log.info("invocation_abandoned", invocation_id=record.invocation_id)
        return Ack(record.invocation_id)
