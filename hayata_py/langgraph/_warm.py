"""Runs held open in the agent process between their decisions.

A decision that stops for tasks leaves LangGraph's loop open
(:func:`~hayata_py.langgraph._drive.advancing`), held here under the
invocation's id with exactly what it handed on: the step it expects next, the
snapshot and carry its lead task returns, the settings and the ids of the
tasks it wants. The next decision of that invocation goes on with the open
loop only when all of these come back unchanged; anything else (another step,
another snapshot, a task answered ``rerun``, a recovery in a new process, an
entry dropped for room) opens the loop again on the snapshot, which gives the
same outcome at a higher cost. So a stale entry is never used: at worst it is
dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from hayata_py.langgraph._drive import Advancing, Outcome, TaskResult

HELD_MAX = 256
"""Runs held at most per agent process; the least recently used is dropped."""


@dataclass
class _Held:
    run: Advancing
    step: int
    settings: dict[str, Any]
    snapshot: bytes
    carry: dict[str, Any]
    tasks: frozenset[str]


_HELD: OrderedDict[str, _Held] = OrderedDict()


def hold(invocation: str, step: int, settings: dict[str, Any], run: Advancing,
         outcome: Outcome) -> None:
    """Keep ``run`` (which just yielded ``outcome`` at decision ``step``) for
    the invocation's next decision; a run that ended is closed instead."""
    drop(invocation)
    if outcome.status != "run":
        run.close()
        return
    _HELD[invocation] = _Held(run, step + 1, settings, outcome.snapshot,
                              outcome.carry.as_dict(), frozenset(t.id for t in outcome.todo))
    while len(_HELD) > HELD_MAX:
        _, old = _HELD.popitem(last=False)
        old.run.close()


def resume(invocation: str, step: int, settings: dict[str, Any], snapshot: bytes,
           carry: dict[str, Any], results: dict[str, TaskResult]
           ) -> tuple[Advancing, Outcome] | None:
    """The held run of ``invocation`` gone on with ``results``, if it stopped
    exactly where decision ``step`` starts (else None, and it is dropped)."""
    held = _HELD.pop(invocation, None)
    if held is None:
        return None
    if (held.step != step or held.tasks != frozenset(results) or held.settings != settings
            or held.carry != carry or held.snapshot != snapshot):
        held.run.close()
        return None
    try:
        outcome = held.run.send(results)
    except StopIteration as end:
        return held.run, end.value
    return held.run, outcome


def drop(invocation: str) -> None:
    """Close and forget the invocation's held run, if any."""
    held = _HELD.pop(invocation, None)
    if held is not None:
        held.run.close()


def held_count() -> int:
    """How many runs are held (for tests)."""
    return len(_HELD)
