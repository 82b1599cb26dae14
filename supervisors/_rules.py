"""The restart rules: what a supervisor does when a child exits, as pure functions.

Modelled on OTP's ``supervisor.erl``: :func:`child_exited` is its
``do_restart`` (the restart type decides), :func:`restart` its ``restart/1``
(the intensity check, then one case per strategy, like ``restart/2``), and
:func:`auto_shutdown` its ``do_auto_shutdown``. No actors, no processes, no
clock of their own: the supervisor actor passes in what they need and
carries out the decision they return.

Decisions:

- :class:`RestartGroup`: stop the siblings in ``stop`` (right to left),
  forget the temporary ones in ``drop`` (OTP never restarts a temporary
  child, not even as a bystander of a sibling's restart), then start
  ``start`` (left to right). A start that fails is retried
  (:func:`restart` again, which counts again).
- :class:`Terminated`: not restarted; ``remove`` it from the child list
  (temporary or dynamic) or keep its spec; ``shutdown``: the supervisor now
  shuts itself down, normally (``auto_shutdown``).
- :class:`Escalate`: more than ``intensity`` restarts within ``period``:
  stop every child and exit abnormally, so that the parent decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supervisors._intensity import add_restart
from supervisors._spec import AutoShutdown, Restart, Strategy, SupervisorFlags


@dataclass(frozen=True)
class Row:
    """What the rules know of one child (in start order)."""

    id: str
    restart: Restart
    significant: bool = False
    alive: bool = True
    """It has a process, or one is due (not terminated)."""


@dataclass(frozen=True)
class RestartGroup:
    child_id: str
    stop: tuple[str, ...]
    """Siblings to stop first, right to left."""
    drop: tuple[str, ...]
    """Temporary siblings: stopped, then removed, never started again."""
    start: tuple[str, ...]
    """Then started, left to right (the exited child among them)."""


@dataclass(frozen=True)
class Terminated:
    child_id: str
    remove: bool
    shutdown: bool = False


@dataclass(frozen=True)
class Escalate:
    child_id: str


Decision = RestartGroup | Terminated | Escalate

Restarts = tuple[float, ...]


def is_restarted(restart: Restart, normal: bool) -> bool:
    """The restart type's answer: permanent always, transient after an
    abnormal exit, temporary never."""
    match restart:
        case Restart.PERMANENT:
            return True
        case Restart.TRANSIENT:
            return not normal
        case Restart.TEMPORARY:
            return False


def group(strategy: Strategy, ids: Sequence[str], child_id: str) -> tuple[str, ...]:
    """The children a restart of ``child_id`` concerns, in start order."""
    match strategy:
        case Strategy.ONE_FOR_ONE | Strategy.SIMPLE_ONE_FOR_ONE:
            return (child_id,)
        case Strategy.REST_FOR_ONE:
            return tuple(ids[list(ids).index(child_id):])
        case Strategy.ONE_FOR_ALL:
            return tuple(ids)


def plan(strategy: Strategy, rows: Sequence[Row], child_id: str) -> RestartGroup:
    """How ``child_id`` is restarted under ``strategy``, bystanders included."""
    members = group(strategy, [r.id for r in rows], child_id)
    by_id = {r.id: r for r in rows}
    siblings = [m for m in members if m != child_id]
    drop = tuple(m for m in siblings if by_id[m].restart is Restart.TEMPORARY)
    return RestartGroup(child_id, tuple(reversed(siblings)), drop,
                        tuple(m for m in members if m not in drop))


def restart(flags: SupervisorFlags, rows: Sequence[Row], child_id: str,
            restarts: Restarts, now: float) -> tuple[RestartGroup | Escalate, Restarts]:
    """Restart ``child_id`` (after its exit, or again after a failed attempt:
    every attempt counts toward the intensity)."""
    kept, exceeded = add_restart(restarts, now, flags.intensity, flags.period)
    if exceeded:
        return Escalate(child_id), kept
    return plan(flags.strategy, rows, child_id), kept


def auto_shutdown(flags: SupervisorFlags, rows: Sequence[Row], exited: Row,
                  dynamic: bool) -> bool:
    """Whether the exit of ``exited`` (not restarted) shuts the supervisor down;
    ``rows`` are the other children."""
    if not exited.significant:
        return False
    match flags.auto_shutdown:
        case AutoShutdown.NEVER:
            return False
        case AutoShutdown.ANY_SIGNIFICANT:
            return True
        case AutoShutdown.ALL_SIGNIFICANT:
            if dynamic:
                return not rows
            return not any(r.significant and r.alive for r in rows)


def child_exited(flags: SupervisorFlags, rows: Sequence[Row], child_id: str, normal: bool,
                 restarts: Restarts, now: float, *, dynamic: bool = False
                 ) -> tuple[Decision, Restarts]:
    """Decide on the exit of ``child_id`` (a member of ``rows``) by itself:
    ``normal`` if it stopped on request or by itself, cleanly."""
    exited = next(r for r in rows if r.id == child_id)
    if is_restarted(exited.restart, normal):
        return restart(flags, rows, child_id, restarts, now)
    others = [r for r in rows if r.id != child_id]
    remove = dynamic or exited.restart is Restart.TEMPORARY
    return Terminated(child_id, remove, auto_shutdown(flags, others, exited, dynamic)), restarts
