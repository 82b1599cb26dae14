"""The runtime's pure decisions, beside the invocation machine
(:mod:`hayata_py._invocation`): plain objects and functions, no Thespian, no
store, no process; time is a parameter (a ``clock`` callable, monotonic
seconds), so each is tested in tables without an actor.

- :mod:`~hayata_py._rules.edge_pool`, :mod:`~hayata_py._rules.edge_slots`:
  which edge runs which task, tasks waiting per node, edges on demand and retired.
- :mod:`~hayata_py._rules.map_link`: the agent's side of a map step's reducer.
- :mod:`~hayata_py._rules.outbox`: sends held per target and merged into one.
- :mod:`~hayata_py._rules.deadlines`: the agent's deadlines, retries and
  renewal in one heap.
- :mod:`~hayata_py._rules.circuits`: the circuit breakers of an agent's nodes.
- :mod:`~hayata_py._rules.recovery`: what recovery does with an interrupted
  step, from its durable records.
- :mod:`~hayata_py._rules.pauses`: what a paused invocation's record says.
- :mod:`~hayata_py._rules.admission`: which runs an agent refuses, and why.
- :mod:`~hayata_py._rules.cancels`: what ``cancel()`` does with an invocation.

The actors (:mod:`hayata_py._actors`) carry their answers out.
"""
