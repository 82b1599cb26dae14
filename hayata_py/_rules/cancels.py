"""What ``cancel(invocation_id)`` does, from what the agent knows of the
invocation (pure; the agent carries it out in ``_actors/agent.py``).

Only an invocation whose step runs in this agent now is stopped: its machine
(:class:`~hayata_py._invocation.machine.Invocation`) stops the step's tasks,
records them ``cancelled`` and ends the invocation ``cancelled``. One that has
ended, or is ending on its own (its result being recorded, its compensations
running), is left as it is: the cancel is a no-op and the caller gets its
result. One that is unfinished but runs nowhere here (paused, kept for
``recover()``, queued behind its thread's run, run by another system) is
refused with ``not_running``, naming what ends it; an unknown id with
``not_found``.
"""

from __future__ import annotations

import enum

from hayata_py._errors import HayataError
from hayata_py._invocation import Phase
from hayata_py.store._records import InvocationRecord

__all__ = ["CancelAnswer", "answer"]


class CancelAnswer(enum.Enum):
    """The agent's answer to a cancel it does not refuse."""

    STOP = "stop"
    """Its step runs here: feed the machine ``CancelRequested``."""
    NO_OP = "no_op"
    """It has ended, or ends on its own: nothing to do."""


def answer(invocation_id: str, agent_id: str, phase: Phase | None,
           record: InvocationRecord | None, *, ended: bool = False,
           queued: bool = False, paused: bool = False) -> CancelAnswer | HayataError:
    """The answer to ``cancel(invocation_id)``.

    ``phase``: the machine's phase if the invocation runs in this agent, else
    None; ``record``: the store's record (None: none, or another agent's);
    ``ended``: the agent knows its result (without a store, the only trace);
    ``queued``: it waits in its thread's queue; ``paused``: it waits for
    ``resume()``."""
    if phase is not None:
        return CancelAnswer.STOP if phase is Phase.RUNNING else CancelAnswer.NO_OP
    if ended:
        return CancelAnswer.NO_OP
    if queued:
        return HayataError(
            f"invocation {invocation_id} is queued behind its thread's running "
            "invocation and has not started: cancel that one, or wait for it",
            code="not_running", invocation_id=invocation_id, queued=True)
    if record is None or record.agent_id != agent_id:
        return HayataError(f"agent {agent_id!r} has no invocation {invocation_id!r}",
                           code="not_found", invocation_id=invocation_id)
    if record.status != "running":
        return CancelAnswer.NO_OP
    if paused:
        return HayataError(
            f"invocation {invocation_id} is paused, not running: resume() goes on "
            "with it, abandon() ends it", code="not_running",
            invocation_id=invocation_id, paused=True)
    return HayataError(
        f"invocation {invocation_id} is not running in agent {agent_id!r} (an "
        "interrupted run kept it for recover(), or another system runs it): "
        "recover() goes on with it, abandon() ends it", code="not_running",
        invocation_id=invocation_id)
