"""The sends of a batching agent to its nodes, edges and reducers: held while
the target has a message on its way, then sent together.

Thespian's TCP transport carries one message at a time to each actor and
waits for its acknowledgement before the next; every message still waiting
is looked at again each time the transport loop turns. An agent serving
hundreds of invocations sends an async edge hundreds of :class:`RunTask`
messages, so the wait and the looking grew with the load. Here a message to
an actor that is still receiving an earlier one waits (like Nagle's
algorithm); when that one is through, everything held for it goes, the tasks
in a row as one :class:`RunTasks` message. A target with nothing in flight
gets its message at once. Every target gets its messages in the order they
were put.

Pure: no Thespian, no store. The agent puts, and takes what may go after
each message it handles (:func:`~hayata_py._actors.transmits.busy_targets`
says which targets still receive).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from hayata_py._actor_messages import RunTask, RunTasks

__all__ = ["Outbox"]


class Outbox:
    """Messages per target, in the order put; RunTasks in a row become one."""

    def __init__(self) -> None:
        self._waiting: dict[Any, tuple[Any, list[Any]]] = {}
        """Target key -> (target, its messages). A Thespian ``ActorAddress`` is not
        hashable; its ``addressDetails`` are, and equal for equal addresses."""

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def put(self, to: Any, message: Any) -> bool:
        """Keep ``message`` for ``to``; True if the outbox was empty before (the
        caller makes sure a take follows)."""
        was_empty = not self._waiting
        self._waiting.setdefault(getattr(to, "addressDetails", to), (to, []))[1].append(message)
        return was_empty

    def take(self, busy: Container[Any] = ()) -> list[tuple[Any, Any]]:
        """What may go now, taken out: per target not in ``busy`` (keys as put:
        ``addressDetails``) and first put first, its messages in order, where two
        or more RunTasks in a row go as one RunTasks. The rest stays."""
        out: list[tuple[Any, Any]] = []
        for key in [k for k in self._waiting if k not in busy]:
            to, messages = self._waiting.pop(key)
            tasks: list[RunTask] = []
            for message in messages:
                if isinstance(message, RunTask):
                    tasks.append(message)
                    continue
                _add_tasks(out, to, tasks)
                tasks = []
                out.append((to, message))
            _add_tasks(out, to, tasks)
        return out


def _add_tasks(out: list[tuple[Any, Any]], to: Any, tasks: list[RunTask]) -> None:
    if len(tasks) == 1:
        out.append((to, tasks[0]))
    elif tasks:
        out.append((to, RunTasks(tuple(tasks))))
