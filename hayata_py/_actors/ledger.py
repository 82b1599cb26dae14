"""The agent's durable side: its store, its unfinished invocations, its results.

Everything the agent writes goes through here, each write one committed
transaction carrying the invocation's fencing token: the invocation record
(before ``RunAccepted``), the checkpoint of a map step or of one that cannot be
placed (before any of its tasks is sent; any other step's rides on its
``RunTask`` messages and is committed by the edges with ``started``:
:meth:`Ledger.foldable`), the terminal result (before anyone is told), lease
renewals. A
refused write comes back as a ``WriteRefused`` event for the machine, marked
``fenced`` when another system owns the invocation now.

It also answers what the store knows: the agent's status, and (through its
:class:`~hayata_py._actors.results.Results` part, :attr:`Ledger.results`) the
results of earlier invocations and the waits on them. The unfinished invocations it holds (found
at start, or kept when a run was interrupted) are acted on by the recovery
requests in :mod:`~hayata_py._actors.recovery_requests` (``recover``,
``resolve_task``, ``abandon``, ``resume``).

With ``max_invocations=1`` an unfinished invocation blocks new runs
(``recovery_required``, ``agent_paused``), as in Hayata; with more, each is its
own recovery case and new runs go on beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hayata_py._actors.results import Results, stored_result
from hayata_py._actors.run_checks import validate_run
from hayata_py._actors.store_access import as_store_error, store_for
from hayata_py._config import AgentSpec
from hayata_py._errors import (
    ErrorInfo,
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
    StoppedTask,
    WriteRefused,
)
from hayata_py._invocation.compensation import History, history
from hayata_py._rules import admission, pauses
from hayata_py.messages import AgentStatus, GetResult, Run, WaitResult
from hayata_py.store import (
    ActiveExecution,
    InvocationRecord,
    StoredEvent,
    TaskRecord,
    TaskStore,
)


def _refused(raw: Exception) -> WriteRefused:
    exc = as_store_error(raw)
    return WriteRefused(ErrorInfo(exc.code, str(exc), dict(exc.details)),
                        fenced=isinstance(exc, StaleWriter))


class Ledger:
    """The agent's store access, its unfinished invocations and (:attr:`results`)
    its recent results."""

    def __init__(self, spec: AgentSpec, log: Any, send: Callable[[Any, Any], None]) -> None:
        self.spec = spec
        self.log = log
        self.send = send
        self.owner = spec.owner or spec.instance
        self.single = spec.max_invocations == 1
        self.store: TaskStore | None = store_for(spec.store_url) if spec.store_url else None
        # Unfinished invocations in the store that nothing here runs: this agent
        # (or system) died while running them, or their run was interrupted. Each
        # waits for recover(), resolve_task(), abandon() (or resume(), if paused).
        self.unfinished: dict[str, InvocationRecord] = {}
        if self.store is not None:
            for record in self.store.unfinished_invocations(spec.id):
                self.unfinished[record.invocation_id] = record
                self.log.warning("recovery_required", invocation_id=record.invocation_id)
        self.results = Results(spec.id, self.store, log, send, self.unfinished)

    # -- writes of a running invocation ------------------------------------------------

    def create(self, invocation_id: str, input: Any, state: dict[str, Any],
               thread: str | None = None, thread_version: int | None = None,
               durable: bool = True) -> int:
        """Record a new invocation (on ``thread``, started from the thread's state
        at ``thread_version``); its fencing token (raises a StoreError:
        ``agent_busy``, ``thread_busy``, ``thread_changed``, ...). ``durable``:
        synced before this returns; False for a run whose sender hears of it
        only from its result (the store's ``create_invocation``)."""
        if self.store is None:
            return 0
        try:
            return self.store.create_invocation(
                InvocationRecord(invocation_id, self.spec.id, "running", 0, state, input,
                                 thread_id=thread),
                owner=self.owner, lease_seconds=self.spec.lease_seconds,
                max_running=1 if self.single else None, thread_version=thread_version,
                durable=durable)
        except Exception as raw:
            raise as_store_error(raw) from raw

    def create_many(self, pending: Sequence[Any]) -> list[int | StoreError]:
        """:meth:`create` of several runs (``Creating``s) in one transaction where
        they all land (group commit); per run its token or its own refusal."""
        assert self.store is not None
        records = [(InvocationRecord(c.invocation_id, self.spec.id, "running", 0, c.state,
                                     c.run.input, thread_id=c.run.thread), c.thread_version)
                   for c in pending]
        try:
            return self.store.create_invocations(
                records, owner=self.owner, lease_seconds=self.spec.lease_seconds,
                max_running=1 if self.single else None,
                durable=not all(c.run.wait for c in pending))
        except Exception as raw:  # noqa: BLE001 - the store failed: each run hears why
            return [as_store_error(raw)] * len(pending)

    def finish_many(self, ends: Sequence[tuple[str, int, RecordResult]]
                    ) -> list[tuple[WriteRefused | None, InvocationRecord | None]]:
        """:meth:`finish` of several invocations in one transaction where they all
        land (group commit); per invocation what :meth:`finish` returns."""
        assert self.store is not None
        items = [(iid, token, "completed" if cmd.ok else "failed", cmd.result,
                  cmd.error.to_dict() if cmd.error else None, cmd.state)
                 for iid, token, cmd in ends]
        try:
            done = self.store.finish_invocations(items, lease_seconds=self.spec.lease_seconds)
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            done = [as_store_error(raw)] * len(ends)
        out: list[tuple[WriteRefused | None, InvocationRecord | None]] = []
        for (iid, _token, _cmd), one in zip(ends, done, strict=True):
            if isinstance(one, Exception):
                self.log.error("finish_refused", invocation_id=iid,
                               code=as_store_error(one).code)
                out.append((_refused(one), None))
            else:
                out.append((None, one))
        return out

    def thread_start(self, thread: str) -> tuple[dict[str, Any], int | None]:
        """The state a new invocation of ``thread`` starts from, and the thread's
        version (None: a new thread, which starts from the agent's state)."""
        assert self.store is not None
        try:
            found = self.store.get_thread(self.spec.id, thread)
        except Exception as raw:
            raise as_store_error(raw) from raw
        if found is None:
            return dict(self.spec.state), None
        return dict(found.state), found.version

    def enqueue(self, invocation_id: str, thread: str, input: Any, stream: bool) -> int:
        """Keep a run for ``thread`` durably until its running invocation ends;
        its place in the queue (raises a StoreError, ``thread_free`` among them)."""
        assert self.store is not None
        try:
            return self.store.enqueue_run(self.spec.id, thread, invocation_id, input,
                                          stream=stream)
        except Exception as raw:
            raise as_store_error(raw) from raw

    def record_of(self, invocation_id: str, input: Any, cp: Checkpoint,
                  paused: dict[str, Any] | None = None) -> InvocationRecord:
        active = None if cp.execution_id is None else ActiveExecution(
            cp.execution_id, cp.step, cp.nodes, cp.input, cp.parallel, cp.map, cp.reduce)
        return InvocationRecord(invocation_id, self.spec.id, "running", cp.step, cp.state,
                                input, active, cp.parallel_results, cp.last_result,
                                paused=paused, failing=cp.failing)

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
                and cp.failing is None
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

    def finish(self, invocation_id: str, token: int, record: RecordResult,
               events: Sequence[StoredEvent] = ()
               ) -> tuple[WriteRefused | None, InvocationRecord | None]:
        """Commit the terminal result (and ``events``, into the log) before anyone
        is told. Returns the refusal, or the invocation the store started in the
        same transaction: the next queued run of the invocation's thread (None
        if there is none)."""
        if self.store is None:
            return None, None
        try:
            started = self.store.finish_invocation(
                invocation_id, token=token, status="completed" if record.ok else "failed",
                result=record.result,
                error=record.error.to_dict() if record.error else None, state=record.state,
                lease_seconds=self.spec.lease_seconds, events=events)
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            self.log.error("finish_refused", invocation_id=invocation_id,
                           code=as_store_error(raw).code)
            return _refused(raw), None
        return None, started

    def record_cancelled(self, invocation_id: str, token: int,
                         tasks: Sequence[StoppedTask], error: ErrorInfo) -> None:
        """Record each task a cancel stopped ``failed`` with ``error`` (fenced),
        creating the record of one its edge had not started yet: none is left
        ``started``, and none can start later (a ``failed`` task refuses its
        start). A task that ended meanwhile keeps its own end; any other refusal
        is logged and shows again in the terminal write that follows."""
        if self.store is None or not tasks:
            return
        failure = error.to_dict()
        try:
            self.store.schedule_tasks([
                TaskRecord(t.task_id, invocation_id, t.execution_id, t.step, t.key.node_id,
                           branch_index=t.branch_index, input=t.input) for t in tasks],
                token=token)
            for task in tasks:
                try:
                    self.store.mark_failed(task.task_id, token=token, error=failure)
                except StoreError as exc:
                    if exc.code != "task_finished":
                        raise
        except Exception as raw:  # noqa: BLE001 - reported; the finish is refused too
            self.log.error("cancelled_tasks_not_recorded", invocation_id=invocation_id,
                           code=as_store_error(raw).code)

    def cancel_facts(self, invocation_id: str) -> tuple[InvocationRecord | None, bool]:
        """What a cancel of an invocation this agent does not run needs: its
        record (None: none), and whether it waits in its thread's queue."""
        if self.store is None:
            return None, False
        record = self.store.get_invocation(invocation_id)
        queued = self.store.queued_run(invocation_id) if record is None else None
        return record, queued is not None and queued.agent_id == self.spec.id

    def compensations(self, invocation_id: str) -> History:
        """Where the invocation's compensations stand (from all its task records)."""
        if self.store is None or not self.spec.compensate:
            return History()
        return history(self.store.get_tasks(invocation_id), self.spec.compensate)

    def renew(self, tokens: Mapping[str, int]) -> dict[str, bool | None]:
        """Extend the leases of the running invocations (id -> token): per id True
        done, False lost to another owner, None a hiccup (try again soon)."""
        assert self.store is not None
        out: dict[str, bool | None] = {}
        try:
            refused = self.store.renew_leases(dict(tokens), owner=self.owner,
                                              lease_seconds=self.spec.lease_seconds)
        except Exception as raw:  # noqa: BLE001 - a store hiccup: try again soon
            self.log.warning("lease_renewal_failed", code=as_store_error(raw).code)
            return dict.fromkeys(tokens)
        for invocation_id in tokens:
            lost = invocation_id in refused
            if lost:
                self.log.error("ownership_lost", invocation_id=invocation_id)
            out[invocation_id] = not lost
        return out

    def keep(self, invocation_id: str, fallback: InvocationRecord) -> None:
        """A run ended without a durable result: the invocation is unfinished in the
        store and waits for recovery (unless it ended elsewhere)."""
        self.results.forget(invocation_id)  # not its result: recover() makes that
        assert self.store is not None
        try:
            record = self.store.get_invocation(invocation_id)
        except Exception as raw:  # noqa: BLE001 - the store is unreachable right now
            self.log.error("store_unavailable", invocation_id=invocation_id,
                           code=as_store_error(raw).code)
            record = fallback  # what we know; re-read on the next request
        if record is not None and record.status == "running":
            self.unfinished[invocation_id] = record

    # -- unfinished invocations, runs refused, status --------------------------------

    def refresh(self, invocation_id: str | None = None) -> None:
        """Forget unfinished invocations (``invocation_id``, default every one) that
        have ended meanwhile (another system recovered or abandoned them): keep
        their stored results, answer their waiters."""
        if self.store is None:
            return
        ids = list(self.unfinished) if invocation_id is None else (
            [invocation_id] if invocation_id in self.unfinished else [])
        for iid in ids:
            try:
                now = self.store.get_invocation(iid)
            except Exception as raw:  # noqa: BLE001 - keep what we know; report later
                self.log.warning("store_unavailable", code=as_store_error(raw).code)
                return
            if now is not None and now.status == "running":
                # The store's record, not what this process guessed when it could
                # not read it (keep()'s fallback has no active execution once the
                # machine cancelled the step): recover() classifies what the store names.
                self.unfinished[iid] = now
                continue
            del self.unfinished[iid]
            self.log.info("unfinished_invocation_ended_elsewhere", invocation_id=iid)
            if now is not None:
                self.results.publish(stored_result(now))

    def discover(self, taken: Callable[[str], bool], invocation_id: str | None = None
                 ) -> None:
        """Learn of the agent's invocations running in the store that nothing
        here runs (``taken``: whether this agent runs, queues or creates an id)
        and that this ledger does not know yet: those another system with an
        agent of this id started after this one did (on one shared store). A
        live owner's lease still keeps them from recovery; one whose owner died
        is recovered like one found at start. ``invocation_id``: look at that
        one only (one read, not one of every running invocation)."""
        if self.store is None:
            return
        try:
            if invocation_id is None:
                records = self.store.unfinished_invocations(self.spec.id)
            else:
                one = self.store.get_invocation(invocation_id)
                records = [one] if one is not None and one.status == "running" \
                    and one.agent_id == self.spec.id else []
        except Exception as raw:  # noqa: BLE001 - keep what we know; report later
            self.log.warning("store_unavailable", code=as_store_error(raw).code)
            return
        for record in records:
            if record.invocation_id not in self.unfinished and not taken(record.invocation_id):
                self.unfinished[record.invocation_id] = record
                self.log.info("unfinished_invocation_found",
                              invocation_id=record.invocation_id)

    def answer(self, message: GetResult | WaitResult, sender: Any, running: bool,
               recovering: bool = False) -> None:
        """Answer a result request (:meth:`Results.answer`), a ``WaitResult`` once
        what this ledger holds of its invocation is fresh."""
        if isinstance(message, WaitResult):
            self.refresh(message.invocation_id)
        self.results.answer(message, sender, running, recovering)

    def paused(self) -> list[InvocationRecord]:
        """The unfinished invocations that wait for ``resume()``."""
        return [r for r in self.unfinished.values() if pauses.is_paused(r)]

    def refuse(self, run: Run, running: int, first: str | None) -> RunRejected | None:
        """Why ``run`` cannot start now (bad; with ``max_invocations=1`` an
        unfinished invocation waits for recovery; ``max_invocations`` are
        ``running`` already, ``first`` the oldest), or None."""
        rejected = validate_run(run)
        if rejected is not None:
            return rejected
        paused: InvocationRecord | None = None
        unfinished: str | None = None
        if self.single and (run.thread is None or self.store is not None):
            self.refresh()
            held = self.paused()
            paused = held[0] if held else None
            unfinished = next(iter(self.unfinished), None)
        return admission.run_refused(
            self.spec.id, run, has_store=self.store is not None, single=self.single,
            paused=paused, unfinished=unfinished, running=running,
            max_invocations=self.spec.max_invocations, first=first)

    def status(self, running: Mapping[str, Any]) -> AgentStatus:
        """The agent's status; ``running``: the invocations it runs (by id, oldest
        first)."""
        if self.single:
            self.refresh()
        idempotent = tuple(sorted(self.spec.idempotent_nodes))
        held = self.paused()
        counts: dict[str, Any] = {"running": len(running), "paused": len(held),
                                  "unfinished": len(self.unfinished),
                                  "max_invocations": self.spec.max_invocations}
        if self.single and self.unfinished:
            first = next(iter(self.unfinished))
            return AgentStatus(self.spec.id, "paused" if held else "recovery_required",
                               first, idempotent_nodes=idempotent, **counts)
        return AgentStatus(self.spec.id, "running" if running else "idle",
                           next(iter(running), None), idempotent_nodes=idempotent,
                           **counts)

    # -- claims ----------------------------------------------------------------------

    def claim(self, record: InvocationRecord) -> int:
        """Take over ``record`` (a new fencing token): no older writer lands after this."""
        assert self.store is not None
        return self.store.claim_invocation(record.invocation_id, owner=self.owner,
                                           lease_seconds=self.spec.lease_seconds)
