"""How an agent lets invocations in: new runs (on threads, enqueued, created in
groups), recoveries and resumes, and ``auto_recover``; a part of
:class:`~hayata_py._actors.agent.AgentActor`, which carries out the rest.

Every run that is let in ends in :meth:`Admission.begin`: its machine joins the
agent's table and gets its first event. Its sender hears ``RunAccepted`` then,
or, for a ``Run(wait=True)`` (``AgentRef.invoke``), only the ``ResultReply`` at
its end, as a ``WaitResult`` would. With ``max_invocations > 1`` and a
store, runs that arrive together are created in one transaction and
invocations that end together are finished in one (group commit): they are
gathered until a message the agent sends itself (:class:`Commit`) comes back,
after the messages that were already waiting.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import uuid
from typing import Any

from hayata_py import _invocation as m
from hayata_py import _telemetry as telemetry
from hayata_py._actors import recovery_requests
from hayata_py._actors.eventlog import EventLog
from hayata_py._actors.in_flight import AgentHost, Commit, Creating, InFlight, Queued
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.node_watch import NodeWatch
from hayata_py._actors.run_checks import validate_run
from hayata_py._actors.spans import InvocationSpans
from hayata_py._config import AgentSpec
from hayata_py._errors import RecoveryRejected, RunRejected, StoreError
from hayata_py._rules import admission, pauses
from hayata_py._rules.deadlines import Deadlines
from hayata_py.messages import Caller, Recover, ResumePaused, Run, RunAccepted
from hayata_py.store import InvocationRecord


class Admission:
    """Runs, recoveries and resumes into the agent's table of invocations
    (``running``, which the agent owns), and the group commit of their creates
    and finishes."""

    def __init__(self, host: AgentHost, running: dict[str, InFlight], spec: AgentSpec,
                 log: Any, ledger: Ledger, rules: m.Rules, spans: InvocationSpans,
                 deadlines: Deadlines, events: EventLog, nodes: NodeWatch) -> None:
        self.host = host
        self.running = running
        self.spec = spec
        self.log = log
        self.ledger = ledger
        self.rules = rules
        self.spans = spans
        self.deadlines = deadlines
        self.events = events
        self.nodes = nodes  # which nodes cannot be placed now (recovery reads it)
        # Run identities: unique across this agent's restarts too (a random start).
        self.run_ids = itertools.count(random.randrange(1, 2**62))
        self.queued: dict[str, Queued] = {}
        self.auto_pending = spec.auto_recover and bool(ledger.unfinished)
        """``auto_recover`` has yet to look at the unfinished invocations (it does
        once the node table is known)."""
        # Group commit, for an agent serving many invocations: creates and finishes
        # that arrive together share one transaction (one fsync). One invocation
        # at a time keeps its single writes: nothing to share, no extra hop.
        self.batching = not ledger.single and ledger.store is not None
        self.creating: list[Creating] = []
        self.finishing: list[tuple[InFlight, m.RecordResult]] = []
        self.commit_pending = False

    # -- starting a run ---------------------------------------------------------------

    def on_run(self, run: Run, sender: Any) -> None:
        first = next(iter(self.running), None) or next(
            (c.invocation_id for c in self.creating), None)
        rejected = self.ledger.refuse(run, len(self.running) + len(self.creating), first)
        if rejected is not None:
            self.host.reply(sender, run, rejected)
            return
        invocation_id = run.invocation_id or uuid.uuid4().hex
        if run.invocation_id is not None and self.taken(invocation_id):
            self.host.reply(sender, run, RunRejected(
                f"invocation {invocation_id} already exists; choose a new invocation_id",
                code="invocation_exists", invocation_id=invocation_id))
            return
        try:
            state, version = (dict(self.spec.state), None) if run.thread is None else \
                self.ledger.thread_start(run.thread)
        except StoreError as exc:
            self._created(Creating(invocation_id, run, sender, {}, None), exc)
            return
        creating = Creating(invocation_id, run, sender, state, version)
        if not self.batching:
            try:
                # A waiting run's create is synced by the next synced commit (its
                # first task's start, its end) before anything of it is seen.
                token = self.ledger.create(invocation_id, run.input, state, run.thread,
                                           version, durable=not run.wait)
            except StoreError as exc:
                self._created(creating, exc)
                return
            self._created(creating, token)
            return
        self.creating.append(creating)  # created with the others that came meanwhile
        self.commit_soon()

    def taken(self, invocation_id: str) -> bool:
        """A sender's chosen id that this agent runs, queues or is creating (the
        store refuses one it has recorded)."""
        return invocation_id in self.running or invocation_id in self.queued or any(
            c.invocation_id == invocation_id for c in self.creating)

    def commit_soon(self) -> None:
        """Group commit: a message to itself, handled after those already waiting,
        carries out every create and finish gathered by then in one transaction."""
        if not self.commit_pending:
            self.commit_pending = True
            self.host.send(self.host.myAddress, Commit())

    def finish_later(self, run: InFlight, cmd: m.RecordResult) -> None:
        """Record ``run``'s end with the others that end meanwhile (group commit)."""
        self.finishing.append((run, cmd))
        self.commit_soon()

    def commit(self) -> None:
        """Carry out every create and finish gathered so far, in one transaction
        each (the agent's :class:`Commit` to itself came back)."""
        self.commit_pending = False
        creating, self.creating = self.creating, []
        if creating:
            made = self.ledger.create_many(creating)
            for pending, token in zip(creating, made, strict=True):
                self._created(pending, token)
        finishing, self.finishing = self.finishing, []
        finishing = [(run, cmd) for run, cmd in finishing if run.inv.id in self.running]
        if finishing:
            ends = self.ledger.finish_many([(run.inv.id, run.token, cmd)
                                            for run, cmd in finishing])
            with self.events.batched():  # the ends' events: one write
                for (run, _cmd), (refused, started) in zip(finishing, ends, strict=True):
                    run.next_started = started
                    self.host.feed(run, refused or m.ResultRecorded())

    def _created(self, pending: Creating, token: int | StoreError) -> None:
        """A create came back: begin the invocation, or answer why not."""
        run, sender, invocation_id = pending.run, pending.sender, pending.invocation_id
        if isinstance(token, int):
            seed = m.Seed(invocation_id, run.input, pending.state, run.stream,
                          thread=run.thread)
            self.begin(seed, token, run.subscriber, sender, m.Begin(), request=run)
            return
        refused = admission.create_refused(self.spec.id, run, token)
        if refused is admission.Created.ENQUEUE:
            self._enqueue(invocation_id, run, sender)
            return
        self.host.reply(sender, run, refused)

    def _enqueue(self, invocation_id: str, run: Run, sender: Any) -> None:
        assert run.thread is not None
        try:
            place = self.ledger.enqueue(invocation_id, run.thread, run.input, run.stream)
        except StoreError as exc:
            if exc.code == "thread_free":  # it ended meanwhile (another system): start it
                self.on_run(dataclasses.replace(run, multitask="reject"), sender)
                return
            self.host.reply(sender, run, RunRejected(f"could not enqueue the run: {exc}",
                                                 code=exc.code))
            return
        subscriber = sender if isinstance(run.subscriber, Caller) else run.subscriber
        self.queued[invocation_id] = Queued(subscriber, run.stream)
        self.log.info("invocation_enqueued", invocation_id=invocation_id, thread=run.thread,
                      place=place)
        if run.wait:
            self.ledger.results.wait_for(invocation_id, sender, run.ref)
        else:
            self.host.reply(sender, run, RunAccepted(invocation_id, queued=place))

    def start_queued(self, record: InvocationRecord) -> None:
        """The store started the next queued run of a thread (with the end of the
        one before it): run it."""
        who = self.queued.pop(record.invocation_id, Queued(None, False))
        seed = m.Seed(record.invocation_id, record.input, dict(record.state),
                      who.stream and who.subscriber is not None, thread=record.thread_id)
        self.begin(seed, 1, who.subscriber, None, m.Begin())

    def on_recover(self, message: Recover | ResumePaused, sender: Any) -> None:
        """``recover()`` an interrupted invocation, or ``resume()`` a paused one."""
        rejected = validate_run(Run(None, message.subscriber, message.stream))
        busy = self._busy()
        answer: Any
        if rejected is not None:
            answer = rejected
        elif busy is not None:
            answer = busy if self.ledger.unfinished or isinstance(message, ResumePaused) \
                else recovery_requests.nothing(self.ledger)
        elif isinstance(message, Recover):
            self.ledger.discover(self.taken, message.invocation_id)
            answer = recovery_requests.recover(self.ledger, message.invocation_id,
                                               self.nodes.unplaced)
        else:
            answer = recovery_requests.resume(self.ledger, message)
        if not isinstance(answer, tuple):
            self.host.reply(sender, message, answer)
            return
        value = message.value if isinstance(message, ResumePaused) else None
        self.resume(answer, message.subscriber, message.stream, sender,
                     isinstance(message, Recover), value, request=message)

    def _busy(self) -> RunRejected | None:
        return admission.agent_full(self.spec.id, single=self.ledger.single,
                                    running=len(self.running),
                                    max_invocations=self.spec.max_invocations,
                                    first=next(iter(self.running), None))

    def resume(self, recovered: recovery_requests.Recovered, subscriber: Any, stream: bool,
                sender: Any, recover: bool, value: Any = None, automatic: bool = False,
                request: Any = None) -> None:
        record, token, resume = recovered
        seed = m.Seed(record.invocation_id, record.input, dict(record.state), stream,
                      record.step, record.last_result, record.parallel_results,
                      resume_value=pauses.resumed_value(record) if recover else value,
                      thread=record.thread_id, sequence=self.events.last(record.invocation_id),
                      compensation=self.ledger.compensations(record.invocation_id))
        self.log.info("invocation_recovered" if recover else "invocation_resumed",
                      invocation_id=seed.invocation_id, step=seed.step, automatic=automatic)
        self.begin(seed, token, subscriber, sender, resume, automatic, request)

    def auto_recover(self) -> None:
        """``auto_recover``: go on with every unfinished invocation that recovery can
        carry on alone; the others (uncertain, paused, busy) wait, listed.

        An invocation carried on this way streams, with no live subscriber:
        its nodes' partial results (``ctx.streamer``) go to the event log,
        where whoever follows the run after the crash reads them
        (``AgentRef.events(follow=True)``, a ``hylg`` stream of the thread)."""
        self.auto_pending = False
        recovered, left = [], []
        for invocation_id in list(self.ledger.unfinished):
            if len(self.running) >= self.spec.max_invocations:
                left.append(invocation_id)
                continue
            answer = recovery_requests.recover(self.ledger, invocation_id, self.nodes.unplaced)
            if isinstance(answer, RecoveryRejected):
                left.append(invocation_id)
                continue
            recovered.append(invocation_id)
            self.resume(answer, None, True, None, True, automatic=True)
        if recovered:
            # Each run's new start is in the log before the agent answers anything
            # else: a reader that asks the agent, then reads the log, finds where
            # the run started again (unstreamed events wait up to QUIET_DELAY).
            self.events.flush()
        self.ledger.results.release(left)
        self.log.info("auto_recovered", recovered=recovered, waiting=left)
        telemetry.execute(telemetry.AUTO_RECOVERY, {"recovered": len(recovered),
                                                   "waiting": len(left)},
                          {"agent_id": self.spec.id, "recovered": recovered, "waiting": left})

    def begin(self, seed: m.Seed, token: int, subscriber: Any, sender: Any,
               first: m.Begin | m.Resume, automatic: bool = False, request: Any = None
               ) -> None:
        run = InFlight(m.Invocation(seed, self.rules), token,
                      sender if isinstance(subscriber, Caller) else subscriber,
                      run_id=next(self.run_ids))
        if self.ledger.store is not None and len(self.running) == 0:
            self.deadlines.renew_in(self.spec.lease_seconds / 3)
        self.running[seed.invocation_id] = run
        self.spans.start(seed.invocation_id, isinstance(first, m.Resume), automatic)
        if isinstance(request, Run) and request.wait:  # invoke: the answer is the result
            self.ledger.results.wait_for(seed.invocation_id, sender, request.ref)
        elif sender is not None:
            self.host.reply(sender, request, RunAccepted(seed.invocation_id, run=run.run_id,
                                                     first=seed.sequence + 1))
        self.log.info("invocation_started", invocation_id=seed.invocation_id)
        self.host.feed(run, first)

