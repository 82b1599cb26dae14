"""A ``hy.CALLER`` stream whose agent process is gone: its end, from the durable log.

An agent stores each event of a run before it sends it, and the run's end
(its terminal event: ``invocation_completed``, ``invocation_failed``,
``invocation_paused``, or ``invocation_interrupted`` when the agent stops with
the run kept for ``recover()``) is stored by that same agent process before
it sends the end and the :class:`~hayata_py.messages.AgentResult`. That
process is the end's one writer: nobody else writes a run's end, so an event
is always in the log before anyone sees it.

Its sends can still be lost: a process that stops (its node supervisor died
and its supervisor restarts both) or is killed can exit before its last
messages are through, and nobody would send them later. A reader of the
stream would then wait for an answer that never comes. So while a stream
waits, :func:`file_from_log` looks every :data:`CHECK_PERIOD` seconds whether
its source process is gone; once it is, the run's missing events and its
result are read from the log (:func:`hayata_py._eventlog_read.run_end`) and
filed into the stream: a live and a late reader end with the same result.
A run whose log has no end (the process was killed before it wrote one)
ends with a result that names its last logged event
(``AgentResult.last_event``), ``invocation_interrupted`` while the store
holds the invocation running.
"""

from __future__ import annotations

from typing import Any

from hayata_py._errors import HayataError
from hayata_py._eventlog_read import run_end
from hayata_py._ref_checks import alive
from hayata_py._ref_wait import REMOTE_ASK_TIMEOUT, WaitingRef

__all__ = ["CHECK_PERIOD", "file_ended", "file_from_log"]

CHECK_PERIOD = 0.5
"""How often a reader waiting for a stream's next message checks its source."""


def file_from_log(agent: WaitingRef, invocation_id: str) -> bool:
    """If the process that sends ``invocation_id``'s stream to this system is
    gone, file the rest of its run from the store's log; True if it did."""
    inbox = agent.system._inbox
    source = inbox.source(invocation_id)
    store = agent.system.store
    if source is None or store is None or (source.has_result and not source.streamed):
        return False
    if not _gone(agent, source.address, source.pid):
        return False
    try:
        events, result = run_end(store, invocation_id, source.first, source.taken, source.run)
    except Exception:  # noqa: BLE001 - the store is away: the next check reads again
        return False
    inbox.file_end(invocation_id, source.address, events if source.streamed else [], result)
    return True


def file_ended(agent: WaitingRef, invocation_id: str) -> bool:
    """``invocation_id`` has ended (its agent answered its result, so its end
    is in the store's log) but its stream here still lacks part of the run (a
    message lost on the way): file the rest from the log. True if it did;
    False when this system follows no such stream or has no store."""
    inbox = agent.system._inbox
    source = inbox.source(invocation_id)
    store = agent.system.store
    if source is None or store is None:
        return False
    events, result = run_end(store, invocation_id, source.first, source.taken, source.run)
    inbox.file_end(invocation_id, source.address, events if source.streamed else [], result)
    return True


def _gone(agent: WaitingRef, address: Any, pid: int | None) -> bool:
    """Has the agent process at ``address`` (``pid`` on this host) stopped? On
    another host: the agent's supervisor names another process now."""
    if pid is not None:
        return not alive(pid)
    try:
        current, _pid = agent.system._agent_address(agent.id, timeout=REMOTE_ASK_TIMEOUT)
    except HayataError:
        return False  # no answer now: look again later
    return bool(current != address)
