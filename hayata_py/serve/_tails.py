"""The newest events of the runs this server carries out, in memory.

A run's stream is its durable event log (``hayata_serve_run_events``); every
SSE client reads it from its position. For a run this server carries out, the
worker keeps the rows it has just written (after their transaction commits)
and, once it has recorded the run's end, that status: a stream that is at the
tail of such a run reads the new rows here instead of from the store (a
thousand streams, each woken a few times a run, would read the store a few
thousand times). A stream behind the rows kept here, or of a run this server
does not carry out (or one being cancelled), reads the store as before: what
is here is a copy of what the log holds, never anything else.

A run whose log is final when it ends (nothing can be appended to it any
more) keeps its status and last rows here after its worker is done, for the
streams woken by its end to read (the newest :data:`ENDED_KEPT` such runs).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["ENDED_KEPT", "ENDED_ROWS", "KEPT", "Row", "Tails"]

Row = tuple[int, str, str]
"""``(seq, event, data as JSON text)``: one event of a run's log."""

KEPT = 256
"""Rows kept per run (a stream further behind reads the store)."""

ENDED_KEPT = 1024
"""Ended runs whose final status and last rows are kept after their worker is done."""

ENDED_ROWS = 16
"""Rows kept of each such ended run."""


@dataclass
class _Tail:
    rows: deque[Row] = field(default_factory=lambda: deque(maxlen=KEPT))
    status: str = "running"
    final: bool = False
    """The run ended and nothing more can be appended to its log."""


class Tails:
    """Per run this server carries out: its newest logged rows and, once
    recorded, its final status. Thread-safe."""

    def __init__(self) -> None:
        self._tails: dict[str, _Tail] = {}
        self._ended: OrderedDict[str, _Tail] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, run_id: str) -> None:
        """``run_id`` is carried out here from now on: its rows are kept."""
        with self._lock:
            self._ended.pop(run_id, None)
            self._tails[run_id] = _Tail()

    def close(self, run_id: str) -> None:
        """``run_id`` is no longer carried out here: its streams read the store,
        unless it ended final (:meth:`ended`): then its status and last rows
        stay, among the newest :data:`ENDED_KEPT`."""
        with self._lock:
            tail = self._tails.pop(run_id, None)
            if tail is None or not tail.final:
                return
            tail.rows = deque(tail.rows, maxlen=ENDED_ROWS)
            self._ended[run_id] = tail
            if len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)

    def forget(self, run_id: str) -> None:
        """Whatever is kept of ``run_id``: its log is about to change again
        (an ended run carried on, or given an error)."""
        with self._lock:
            self._tails.pop(run_id, None)
            self._ended.pop(run_id, None)

    def logged(self, run_id: str, rows: Sequence[Row]) -> None:
        """``rows`` were committed to ``run_id``'s log, in order."""
        with self._lock:
            tail = self._tails.get(run_id)
            if tail is not None:
                if tail.rows and rows and rows[0][0] != tail.rows[-1][0] + 1:
                    tail.rows.clear()  # a gap: keep only what follows it
                tail.rows.extend(rows)

    def ended(self, run_id: str, status: str, *, final: bool = False) -> None:
        """``run_id``'s ``status`` at its end is recorded (after all its rows);
        ``final``: nothing can be appended to its log any more."""
        with self._lock:
            tail = self._tails.get(run_id)
            if tail is not None:
                tail.status = status
                tail.final = final

    def status(self, run_id: str) -> str | None:
        """``run_id``'s status if kept here (None: read the store)."""
        with self._lock:
            tail = self._tails.get(run_id) or self._ended.get(run_id)
            return tail.status if tail is not None else None

    def after(self, run_id: str, seq: int) -> tuple[str, list[Row]] | None:
        """``run_id``'s status and its rows after ``seq``, if kept here: the
        rows from ``seq + 1`` on are all here (none are written yet, or the
        first kept is ``seq + 1`` or earlier). None: read the store."""
        with self._lock:
            tail = self._tails.get(run_id) or self._ended.get(run_id)
            if tail is None or not tail.rows or tail.rows[0][0] > seq + 1 \
                    or tail.rows[-1][0] < seq:
                return None
            return tail.status, [row for row in tail.rows if row[0] > seq]
