"""The observer: a live page for a running system, like Erlang's observer.

:func:`observe` serves it for an :class:`~hayata_py.AgentSystem` (``hayata
observe`` for the system of a data dir): the supervision tree with OS pids,
restart counts and status, updated live; agents and their invocations with
their durable tasks and recovery classes; an invocation's events as they
arrive; and the drill and recovery actions (kill, run, recover, resolve,
abandon), each confirmed and shown with the ``hayata`` command that does the
same. It needs the ``observe`` extra (Starlette and uvicorn).
"""

from hayata_py._observer._observe import observe
from hayata_py._observer._server import DEFAULT_PORT, Observer

__all__ = ["DEFAULT_PORT", "Observer", "observe"]
