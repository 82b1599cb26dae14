"""The agent's event log (``_actors/eventlog.py``) with a store double: what a
live subscriber gets is always in the log, under the same sequence; events the
store fenced out or could not take are never sent, and the run's result names
the last event its subscriber got, which the CALLER inbox honours."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

from hayata_py._actor_messages import BatchSubscriber, EventBatch
from hayata_py._actors.eventlog import FLUSH_DELAY, QUIET_DELAY, EventLog
from hayata_py._errors import ErrorInfo, StoreError
from hayata_py._inbox import Inbox
from hayata_py._invocation import Emit
from hayata_py.messages import AgentEvent, AgentResult
from hayata_py.store import StoredEvent

pytestmark = pytest.mark.timeout(10)


class Log:
    """A store double for the event log: events written under a ``fenced``
    (invocation, token) are refused, ``down`` makes every write raise."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], StoredEvent] = {}
        self.fenced: set[tuple[str, int]] = set()
        self.down = False

    def append_events(self, events: Sequence[tuple[StoredEvent, int]]
                      ) -> set[tuple[str, int]]:
        if self.down:
            raise StoreError("database is locked", code="store_unavailable")
        refused = {(e.invocation_id, token) for e, token in events
                   if (e.invocation_id, token) in self.fenced}
        for event, token in events:
            if (event.invocation_id, token) not in refused:
                self.rows.setdefault((event.invocation_id, event.sequence), event)
        return refused


class Quiet:
    def warning(self, *_: Any, **__: Any) -> None:
        return None


def eventlog(store: Log) -> tuple[EventLog, list[tuple[Any, Any]]]:
    sent: list[tuple[Any, Any]] = []
    log = EventLog(store, Quiet(), lambda to, m: sent.append((to, m)), lambda _at: None)
    return log, sent


def emit(log: EventLog, inv: str, seq: int, kind: str = "node_started", token: int = 1) -> None:
    log.emit(inv, token, Emit(seq, kind, {"n": seq}), "caller", token)


def interrupted(inv: str) -> AgentResult:
    return AgentResult(inv, False, error=ErrorInfo("ownership_lost", "taken over", {}),
                       status="interrupted", run=1)


def test_what_is_sent_was_stored_first_under_the_same_sequence() -> None:
    store = Log()
    log, sent = eventlog(store)
    for seq in (1, 2):
        emit(log, "a", seq)
    assert sent == []  # not before the write
    log.flush()
    assert [m.sequence for _, m in sent] == [1, 2]
    assert all(store.rows[("a", m.sequence)].data == m.data for _, m in sent)


def test_a_fenced_run_sends_nothing_unstored_and_its_result_names_the_last_event() -> None:
    store = Log()
    log, sent = eventlog(store)
    emit(log, "a", 1, "invocation_started")
    emit(log, "b", 1, "invocation_started")
    log.flush()
    store.fenced.add(("a", 1))  # another owner took "a" over
    emit(log, "a", 2)
    emit(log, "a", 3, "invocation_interrupted")
    emit(log, "b", 2)
    log.result("caller", interrupted("a"))
    log.flush()
    got = [(m.invocation_id, getattr(m, "sequence", None)) for _, m in sent]
    # In order per invocation (across invocations the order is free).
    assert [g for g in got if g[0] == "a"] == [("a", 1), ("a", None)]
    assert [g for g in got if g[0] == "b"] == [("b", 1), ("b", 2)]
    results = [m for _, m in sent if isinstance(m, AgentResult)]
    assert [r.last_event for r in results] == [1]
    assert ("a", 2) not in store.rows


def test_events_the_store_cannot_take_wait_and_at_stop_are_dropped_not_sent() -> None:
    store = Log()
    log, sent = eventlog(store)
    emit(log, "a", 1, "invocation_started")
    log.flush()
    store.down = True
    emit(log, "a", 2)
    log.result("caller", interrupted("a"))
    log.flush()
    assert len(sent) == 1  # the stream pauses: nothing skipped, nothing unstored sent
    log.stopping = True
    log.close()
    assert [type(m).__name__ for _, m in sent] == ["AgentEvent", "AgentResult"]
    assert sent[-1][1].last_event == 1


def test_the_inbox_releases_a_result_after_the_last_event_it_names() -> None:
    inbox = Inbox()
    inbox.expect("a", "agent", streamed=True, run=1, first=4)
    inbox.deliver("agent", AgentEvent("a", "invocation_started", 4, {}, 1))
    inbox.deliver("agent", AgentResult("a", False, status="interrupted", run=1,
                                       last_event=5))
    assert isinstance(inbox.take("a"), AgentEvent)
    assert inbox.take("a") is None  # event 5 was sent: the result waits for it
    inbox.deliver("agent", AgentEvent("a", "node_started", 5, {}, 1))
    assert inbox.take("a").sequence == 5  # type: ignore[union-attr]
    assert isinstance(inbox.take("a"), AgentResult)


def test_a_result_that_names_no_event_is_released_at_once() -> None:
    inbox = Inbox()
    inbox.expect("a", "agent", streamed=True, run=1, first=1)
    inbox.deliver("agent", AgentResult("a", False, status="interrupted", run=1,
                                       last_event=0))
    assert isinstance(inbox.take("a"), AgentResult)


def test_a_runs_last_events_ride_on_its_result_commit_and_go_out_after_it() -> None:
    """take() hands the run's unwritten events to the result's commit; once it
    committed they are sent, and the terminal event the machine then emits
    (written in that commit) goes out at once, with no write of its own."""
    store = Log()
    log, sent = eventlog(store)
    emit(log, "a", 1, "invocation_started")
    emit(log, "b", 1, "invocation_started")
    taken = log.take("a")
    assert [p.message.sequence for p in taken] == [1] and list(log.pending) == ["b"]
    terminal = Emit(2, "invocation_completed", {"result": 1})
    assert [e.sequence for e in log.stored(taken, terminal, "a")] == [1, 2]
    log.written("a", taken, terminal, ok=True)
    log.emit("a", 1, terminal, "caller", 1)
    log.ending("a")
    log.result("caller", AgentResult("a", True, 1, run=1))
    assert [(m.invocation_id, getattr(m, "sequence", "result")) for _, m in sent] == [
        ("a", 1), ("a", 2), ("a", "result")]
    assert store.rows == {}  # the double took no write: finish_invocation carried them
    assert [p.message.invocation_id for p in log.pending["b"]] == ["b"]


def test_a_refused_result_commit_gives_the_events_back_in_order() -> None:
    store = Log()
    log, sent = eventlog(store)
    emit(log, "a", 1, "invocation_started")
    emit(log, "a", 2)
    taken = log.take("a")
    log.written("a", taken, Emit(3, "invocation_completed", {}), ok=False)
    emit(log, "a", 3, "invocation_interrupted")
    log.flush()
    assert [m.sequence for _, m in sent] == [1, 2, 3]
    assert store.rows[("a", 3)].type == "invocation_interrupted"


def test_a_result_after_its_fenced_events_were_dropped_still_names_the_last_event() -> None:
    """The run's events were refused (fenced) in a write before its result came:
    the result, sent on its own later, names the last event that was sent (the
    campaign's takeovers found a caller waiting for a terminal event that was
    dropped)."""
    store = Log()
    log, sent = eventlog(store)
    emit(log, "a", 1, "invocation_started")
    log.flush()
    store.fenced.add(("a", 1))
    emit(log, "a", 2, "invocation_interrupted")
    log.ending("a")  # the write: refused, dropped
    log.result("caller", interrupted("a"))
    assert [getattr(m, "sequence", None) for _, m in sent] == [1, None]
    assert sent[-1][1].last_event == 1


def test_a_batch_with_a_replaced_run_and_the_run_that_took_over_sends_the_new_runs_events(
        ) -> None:
    """Run 1 of "a" (token 1) was taken over by run 2 in this same agent (token 2)
    while both had events waiting: the write refuses run 1's, stores run 2's, and
    only run 2's are sent (they were dropped with run 1's before)."""
    store = Log()
    log, sent = eventlog(store)
    store.fenced.add(("a", 1))
    emit(log, "a", 2, token=1)
    emit(log, "a", 2, "invocation_resumed", token=2)
    emit(log, "a", 3, token=2)
    log.flush()
    assert [(m.sequence, m.type) for _, m in sent] == [(2, "invocation_resumed"),
                                                      (3, "node_started")]
    assert [e.type for e in store.rows.values()] == ["invocation_resumed", "node_started"]


def test_an_event_nobody_waits_for_live_waits_longer_for_its_write() -> None:
    """A streamed run's event is written within FLUSH_DELAY (its subscriber
    waits for it); one nobody receives live, within QUIET_DELAY; a streamed
    event after a quiet one brings the write forward, never back."""
    armed: list[float] = []
    log = EventLog(Log(), Quiet(), lambda _to, _m: None, armed.append)
    before = time.monotonic()
    log.emit("quiet", 1, Emit(1, "node_started", {}), None, 1)
    after = time.monotonic()
    assert before + QUIET_DELAY <= log.flush_at <= after + QUIET_DELAY
    assert armed == [log.flush_at]
    log.emit("quiet", 1, Emit(2, "node_started", {}), None, 1)
    assert len(armed) == 1  # the wakeup already armed serves
    before = time.monotonic()
    log.emit("live", 1, Emit(1, "node_started", {}), "caller", 1)
    after = time.monotonic()
    assert before + FLUSH_DELAY <= log.flush_at <= after + FLUSH_DELAY
    assert armed[-1] == log.flush_at and len(armed) == 2
    log.emit("quiet", 1, Emit(3, "node_started", {}), None, 1)
    assert len(armed) == 2 and log.flush_at == armed[-1]  # not pushed back
    assert FLUSH_DELAY < QUIET_DELAY


def test_a_wakeup_writes_only_events_that_waited_their_time() -> None:
    """A run whose events rode on its result's commit leaves its wakeup armed;
    when it fires, the next run's events (emitted since, not yet due) are not
    written for it: the wakeup moves to when they are due, and they are
    written then if their run is still going."""
    armed: list[float] = []
    store = Log()
    log = EventLog(store, Quiet(), lambda _to, _m: None, armed.append)
    log.emit("first", 1, Emit(1, "node_started", {}), None, 1)
    taken = log.take("first")  # its run ends: its events go with its result
    log.written("first", taken, None, True)
    log.emit("second", 1, Emit(1, "node_started", {}), None, 1)
    second_due = log.pending["second"][0].due
    assert second_due > armed[0]
    log.flush_at = time.monotonic()  # the first run's wakeup fires, early for the second
    log.due()
    assert store.rows == {}  # nothing written for a run still within its delay
    assert log.flush_at == second_due and armed[-1] == second_due
    log.pending["second"][0].due = time.monotonic()  # now it has waited its time
    log.flush_at = time.monotonic()
    log.due()
    assert list(store.rows) == [("second", 1)]
    assert log.flush_at == float("inf") and not log.pending


def test_a_refused_result_commit_puts_its_events_back_due_soon() -> None:
    """Events a run's result commit could not carry are written on their own
    within FLUSH_DELAY, not after the rest of their QUIET_DELAY."""
    armed: list[float] = []
    store = Log()
    log = EventLog(store, Quiet(), lambda _to, _m: None, armed.append)
    log.emit("a", 1, Emit(1, "node_started", {}), None, 1)
    taken = log.take("a")
    before = time.monotonic()
    log.written("a", taken, None, False)
    assert log.pending["a"][0].due <= time.monotonic() + FLUSH_DELAY
    assert before + FLUSH_DELAY <= log.flush_at <= time.monotonic() + FLUSH_DELAY


def test_a_write_reaches_a_batch_subscriber_in_one_message_and_an_actor_one_by_one() -> None:
    store = Log()
    log, sent = eventlog(store)
    receiver = BatchSubscriber("receiver")
    for inv in ("a", "b"):
        log.emit(inv, 1, Emit(1, "invocation_started", {}), receiver, 1)
        log.emit(inv, 1, Emit(2, "invocation_completed", {}), receiver, 1)
    log.emit("c", 1, Emit(1, "invocation_started", {}), "actor", 1)
    log.emit("c", 1, Emit(2, "node_started", {}), "actor", 1)
    log.result(receiver, AgentResult("a", True, result=1, run=1))
    log.flush()
    batches = [(to, m) for to, m in sent if to == "receiver"]
    assert len(batches) == 1 and isinstance(batches[0][1], EventBatch)
    assert [(m.invocation_id, getattr(m, "sequence", "result"))
            for m in batches[0][1].messages] == [
        ("a", 1), ("a", 2), ("a", "result"), ("b", 1), ("b", 2)]
    assert [(to, m.sequence) for to, m in sent if to == "actor"] == [("actor", 1), ("actor", 2)]
    # what the receiver's inbox makes of the batch: each stream in order, then its result
    inbox = Inbox()
    inbox.expect("a", "agent", streamed=True)
    inbox.deliver("agent", batches[0][1])
    assert [inbox.take("a") for _ in range(3)][-1] == AgentResult("a", True, result=1, run=1)


def test_a_single_message_to_a_batch_subscriber_goes_on_its_own() -> None:
    log, sent = eventlog(Log())
    receiver = BatchSubscriber("receiver")
    log.emit("a", 1, Emit(1, "invocation_started", {}), receiver, 1)
    log.flush()
    assert len(sent) == 1 and sent[0][0] == "receiver" and isinstance(sent[0][1], AgentEvent)
    log.result(receiver, AgentResult("a", True, result=1, run=1))  # nothing pending: at once
    assert sent[-1] == ("receiver", AgentResult("a", True, result=1, run=1))
