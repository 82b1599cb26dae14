"""The agent's side of the durable event log: an event is stored before anyone sees it.

Every event of an invocation of an agent with a store is written to the
store's log (``hayata_events``) under the sequence number its machine gave it,
and only after that write has committed is the live copy sent to the run's
subscriber (when the run streams). So whatever a subscriber saw, the log has,
under the same sequence, across any crash: a crash can lose only events that
nobody saw, and a recovered run numbers on from the last stored sequence
(``Seed.sequence``), so the log has no gap.

Events are not written one commit each: they gather and go in one
transaction with those of every other invocation of the agent, at most
:data:`FLUSH_DELAY` seconds after the first of them when a live subscriber
waits for one (a streamed run: it sees an event only once it is stored), at
most :data:`QUIET_DELAY` seconds otherwise (the agent arms a wakeup); readers
of the log in other processes poll it about as often. A wakeup writes
only when some event has waited its time: the events of a run that ended
before (carried by its result's commit) leave a wakeup armed, and the run
after it, still within its own delay, is not written for it (a sequential
caller's short runs would otherwise each pay a commit of their own every
:data:`QUIET_DELAY`). The end of a
run rides on the commit of its result: the events still gathering and the
terminal event are written in the same transaction as the terminal record
(:meth:`take`, :meth:`written`; ``TaskStore.finish_invocation(events=...)``),
so the end of a run costs no commit of its own for its events (an
unstreamed run shorter than :data:`QUIET_DELAY` none at all).
Inside the agent's group commit (``batched()``) the ends of several
invocations share one write of their events.

While the store refuses the write (it is away, the disk is full), the events
stay here and the write is tried again every :data:`RETRY_DELAY` seconds: the
stream pauses, it does not skip. Events of an invocation that another owner
took over (its token is no longer this run's) are not stored, so they are not
sent either: that run's result reaches its subscriber after the last event
that was stored, and names it (``AgentResult.last_event``); the run ends
``ownership_lost``. So do the events still unstored when the agent stops.
Without a store, events go to the subscriber at once, as they always did.

What one write stored goes to hayata's own CALLER receivers
(:class:`~hayata_py._actor_messages.BatchSubscriber`) in one
:class:`~hayata_py._actor_messages.EventBatch` per receiver, whatever
invocations it holds: a thousand streamed runs in one caller process cost a
message per write, not one per event (each message is a round trip of
Thespian's transport in the agent and in the caller). An actor subscriber
gets each event on its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hayata_py._actor_messages import BatchSubscriber, EventBatch
from hayata_py._actors.store_access import as_store_error
from hayata_py._invocation import Emit
from hayata_py.messages import AgentEvent, AgentResult
from hayata_py.store import StoredEvent, TaskStore

FLUSH_DELAY = 0.01
"""Seconds an event of a streamed run may wait for the write it shares with
others: its live subscriber waits that long at most for it."""
QUIET_DELAY = 0.1
"""Seconds an event nobody waits for live may wait for its write (what a crash
can lose of a run's events, besides those still unwritten while the store is
away). Longer than :data:`FLUSH_DELAY`: a short run's events all ride on its
result's commit, and a long map's gather in a few commits instead of one per
10 ms (measured: seq3 and map100 latency, ``docs/guide/performance.md``)."""
RETRY_DELAY = 0.5
"""Seconds between two tries of a write the store refused."""


class _Outgoing:
    """Messages on their way out of one delivery: an actor subscriber's are sent
    at once; a :class:`BatchSubscriber`'s gather, in order, and go in one
    :class:`EventBatch` per receiver on :meth:`close`."""

    def __init__(self, send: Callable[[Any, Any], None]) -> None:
        self.send = send
        self.batches: list[tuple[Any, list[Any]]] = []  # addresses are not hashable

    def add(self, to: Any, message: Any) -> None:
        if not isinstance(to, BatchSubscriber):
            self.send(to, message)
            return
        for address, messages in self.batches:
            if address == to.address:
                messages.append(message)
                return
        self.batches.append((to.address, [message]))

    def close(self) -> None:
        batches, self.batches = self.batches, []
        for address, messages in batches:
            self.send(address, messages[0] if len(messages) == 1
                      else EventBatch(tuple(messages)))


def send_now(send: Callable[[Any, Any], None], to: Any, message: Any) -> None:
    """Send ``message`` to a subscriber on its own (a :class:`BatchSubscriber`
    takes a single message as well)."""
    send(to.address if isinstance(to, BatchSubscriber) else to, message)


@dataclass
class _Pending:
    event: StoredEvent | None  # None: a held result, sent once the events before it are
    token: int
    to: Any  # the live subscriber, or None
    message: AgentEvent | AgentResult
    due: float = math.inf  # written by then (monotonic); a held result: with its events


class EventLog:
    """Events of the agent's running invocations on their way to the store and on."""

    def __init__(self, store: TaskStore | None, log: Any, send: Callable[[Any, Any], None],
                 arm: Callable[[float], None]) -> None:
        self.store = store
        self.log = log
        self.send = send
        self.arm = arm
        self.pending: dict[str, list[_Pending]] = {}
        """Invocation -> its events still to be written (and a result held behind
        them), in order: a run's end looks at its own, never at all of them."""
        self.sent: dict[str, int] = {}
        """Invocation -> the last event sent to its run's live subscriber."""
        self.cut: set[str] = set()
        """Invocations whose events were dropped unstored since their run's result
        (fenced): that result names the last event sent."""
        self.prestored: dict[str, int] = {}
        """Invocation -> the sequence of its terminal event, already written with
        its result (:meth:`written`): sent at once when the machine emits it."""
        self.flush_at = math.inf
        self._held = 0  # > 0: inside batched(): ends wait for its one write
        self._ends_held = False  # a run ended inside the batch with events unwritten
        self.stopping = False
        """The agent stops: no more wakeups (a timer armed while an actor exits
        ends Thespian's last drain of its sends early); each end and close() write."""

    def last(self, invocation_id: str) -> int:
        """The last stored sequence of the invocation (0: none, or no store)."""
        return 0 if self.store is None else self.store.last_event(invocation_id)

    def emit(self, invocation_id: str, token: int, cmd: Emit, to: Any, run_id: int) -> None:
        """The machine emitted ``cmd``: store it, then send it to ``to`` (None: no
        live copy)."""
        message = AgentEvent(invocation_id, cmd.type, cmd.sequence, cmd.data, run_id)
        if self.store is None or self.prestored.get(invocation_id) == cmd.sequence:
            self.prestored.pop(invocation_id, None)  # written with the run's result
            if to is not None:
                self.sent[invocation_id] = cmd.sequence
                send_now(self.send, to, message)
            return
        due = time.monotonic() + (QUIET_DELAY if to is None else FLUSH_DELAY)
        self.pending.setdefault(invocation_id, []).append(_Pending(
            StoredEvent(invocation_id, cmd.sequence, cmd.type, cmd.data), token, to, message,
            due))
        self._due_at(due)

    def _due_in(self, seconds: float) -> None:
        """Make sure the pending events are written within ``seconds``."""
        self._due_at(time.monotonic() + seconds)

    def _due_at(self, at: float) -> None:
        """Make sure the pending events are written by ``at`` (monotonic)."""
        if at < self.flush_at and not self.stopping:
            self.flush_at = at
            self.arm(at)

    def _all(self) -> list[_Pending]:
        return [p for mine in self.pending.values() for p in mine]

    def take(self, invocation_id: str) -> list[_Pending]:
        """The invocation's events still to be written, taken out: its run's
        result is about to be committed, and they go in that commit."""
        if self.store is None or self._held:
            return []
        return self.pending.pop(invocation_id, [])

    def written(self, invocation_id: str, taken: list[_Pending], terminal: Emit | None,
                ok: bool) -> None:
        """The result commit that carried ``taken`` (and ``terminal``) came back:
        send them (``ok``), or put them back to be written on their own."""
        if not ok:
            if taken:  # before anything of the invocation emitted since
                soon = time.monotonic() + FLUSH_DELAY
                for p in taken:
                    p.due = min(p.due, soon)
                self.pending[invocation_id] = taken + self.pending.get(invocation_id, [])
                self._due_at(soon)
            return
        self._deliver(taken, set())
        if terminal is not None:
            self.prestored[invocation_id] = terminal.sequence

    @staticmethod
    def stored(taken: list[_Pending], terminal: Emit | None, invocation_id: str
               ) -> list[StoredEvent]:
        """What a result commit carries into the log."""
        events = [p.event for p in taken if p.event is not None]
        if terminal is not None:
            events.append(StoredEvent(invocation_id, terminal.sequence, terminal.type,
                                      terminal.data))
        return events

    def ending(self, invocation_id: str) -> None:
        """A run is ending: its events are written now (unless a batch is open)."""
        self.prestored.pop(invocation_id, None)
        if invocation_id in self.pending:
            if self._held:
                self._ends_held = True  # written on the way out of the batch
            else:
                self.flush()

    def result(self, to: Any, result: AgentResult) -> None:
        """``result`` goes to ``to`` once the events before it are stored and sent
        (at once, unless a batch is open or the store refused them)."""
        if to is None:
            self.sent.pop(result.invocation_id, None)
            self.cut.discard(result.invocation_id)
            return
        if self.store is None or result.invocation_id not in self.pending:
            send_now(self.send, to, self._with_last_event(result))
        else:
            self.pending[result.invocation_id].append(_Pending(None, 0, to, result))

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Ends inside share one write, made on the way out."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held and (self._ends_held or any(p.event is None
                                                          for p in self._all())):
                self._ends_held = False
                self.flush()

    def due(self) -> None:
        """A wakeup: write every pending event (one transaction) once one of them
        has waited its time; else wait for the first that will."""
        now = time.monotonic()
        if now < self.flush_at:
            return
        first = min((p.due for p in self._all()), default=math.inf)
        if first <= now:
            self.flush()
            return
        self.flush_at = math.inf
        if first < math.inf:
            self._due_at(first)

    def flush(self) -> None:
        """Write every pending event in one transaction, then send them (and the
        results held behind them) in order per invocation. Refused: tried again
        later."""
        self.flush_at = math.inf
        if not self.pending:
            return
        assert self.store is not None
        events = [(p.event, p.token) for p in self._all() if p.event is not None]
        try:
            fenced = self.store.append_events(events)
        except Exception as raw:  # noqa: BLE001 - kept; the stream pauses, nothing skipped
            self.log.warning("event_log_write_failed", code=as_store_error(raw).code,
                             events=len(events))
            self.flush_at = time.monotonic() + RETRY_DELAY
            if not self.stopping:
                self.arm(self.flush_at)
            return
        written, self.pending = self._all(), {}
        self.flush_at = math.inf
        self._deliver(written, fenced)

    def _deliver(self, pending: list[_Pending], unstored: set[tuple[str, int]]) -> None:
        """Send what was stored, in order; events of ``unstored`` runs (invocation,
        token) are dropped and their results name the last event their subscriber
        got. Events of the run that took over in this agent (a newer token) go."""
        out = _Outgoing(self.send)
        for p in pending:
            invocation_id = p.message.invocation_id
            if p.to is None:
                continue
            if isinstance(p.message, AgentResult):
                out.add(p.to, self._with_last_event(p.message))
            elif (invocation_id, p.token) in unstored:
                self.cut.add(invocation_id)
            else:
                self.sent[invocation_id] = p.message.sequence
                out.add(p.to, p.message)
        out.close()

    def _with_last_event(self, result: AgentResult) -> AgentResult:
        """A run's result as sent: if some of its events were never stored (so
        never sent), it names the last one that was."""
        invocation_id = result.invocation_id
        last = self.sent.pop(invocation_id, 0)
        if invocation_id in self.cut:
            self.cut.discard(invocation_id)
            result = dataclasses.replace(result, last_event=last)
        return result

    def close(self) -> None:
        """The agent stops: a last write; the results held behind what it cannot
        store still reach their subscribers (nobody would send them later),
        those events do not (they are not in the log)."""
        self.flush()
        left, self.pending = self._all(), {}
        self._deliver(left, {(p.message.invocation_id, p.token) for p in left
                             if p.event is not None})
