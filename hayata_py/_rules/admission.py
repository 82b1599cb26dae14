"""Whether an agent lets a run in (pure): the refusals of a new run, of a
recovery or resume when the agent is full, and what a refused create of an
invocation record means for its sender.

The agent's :class:`~hayata_py._actors.admission.Admission` asks these with
what it knows (how many run, the oldest, what its ledger holds) and carries
the answer out; a run's own fields are checked before
(:func:`~hayata_py._actors.run_checks.validate_run`).
"""

from __future__ import annotations

import enum

from hayata_py._errors import RunRejected, StoreError
from hayata_py._rules import pauses
from hayata_py.messages import Run
from hayata_py.store._records import InvocationRecord

__all__ = ["Created", "agent_full", "create_refused", "run_refused"]


def run_refused(agent_id: str, run: Run, *, has_store: bool, single: bool,
                paused: InvocationRecord | None, unfinished: str | None, running: int,
                max_invocations: int, first: str | None) -> RunRejected | None:
    """Why a well-formed ``run`` cannot start now, or None.

    A thread needs a store. With ``single`` (``max_invocations=1``) a paused
    invocation (``paused``) or an unfinished one (``unfinished``, its id)
    waits for ``resume()`` or recovery first. ``running`` invocations (the
    oldest ``first``) at ``max_invocations``: the agent is busy."""
    if run.thread is not None and not has_store:
        return RunRejected("threads are kept in the store: this agent has none "
                           "(start the system with a data_dir or store_url)",
                           code="invalid_option", field="thread")
    if single and paused is not None:
        return pauses.refuse_run(agent_id, paused)
    if single and unfinished is not None:
        return RunRejected(
            f"agent {agent_id!r} has an unfinished invocation {unfinished}; call "
            "recover(), resolve_task() or abandon() first", code="recovery_required",
            invocation_id=unfinished)
    if running >= max_invocations:
        if single:
            return RunRejected(f"agent {agent_id!r} is running invocation "
                               f"{first}", code="agent_busy",
                               invocation_id=first, running=running,
                               max_invocations=max_invocations)
        return RunRejected(
            f"agent {agent_id!r} runs {running} invocations, its "
            f"max_invocations", code="agent_busy", running=running,
            max_invocations=max_invocations)
    return None


def agent_full(agent_id: str, *, single: bool, running: int, max_invocations: int,
               first: str | None) -> RunRejected | None:
    """Why a recovery or resume cannot start now (the agent runs
    ``max_invocations`` already, the oldest ``first``), or None."""
    if running < max_invocations:
        return None
    if single:
        return RunRejected(f"agent {agent_id!r} is running invocation {first}",
                           code="agent_busy", invocation_id=first)
    return RunRejected(f"agent {agent_id!r} runs {running} invocations, its "
                       "max_invocations", code="agent_busy", running=running,
                       max_invocations=max_invocations)


class Created(enum.Enum):
    """What a refused create of a run's invocation record leads to."""

    ENQUEUE = "enqueue"
    """Its thread is busy and the run asked to wait its turn: enqueue it."""


def create_refused(agent_id: str, run: Run, exc: StoreError) -> RunRejected | Created:
    """The store refused to record ``run``'s invocation with ``exc``: enqueue it
    on its busy thread (``multitask='enqueue'``) or refuse it, saying why."""
    if exc.code == "thread_busy" and run.multitask == "enqueue":
        return Created.ENQUEUE
    if exc.code in ("thread_busy", "thread_changed"):
        return RunRejected(
            f"thread {run.thread!r} of agent {agent_id!r} is running invocation "
            f"{exc.details.get('invocation_id')}; wait for it, or run with "
            "multitask='enqueue'", code="thread_busy", thread=run.thread,
            invocation_id=exc.details.get("invocation_id"))
    return RunRejected(f"could not record the invocation: {exc}", code=exc.code)
