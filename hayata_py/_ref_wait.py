"""How :meth:`AgentRef.wait <hayata_py._ref.AgentRef.wait>` and
:meth:`~hayata_py._ref.AgentRef.invoke` wait for an invocation's end: the
:class:`Waiting` mixin of :class:`~hayata_py._ref.AgentRef`.

The wait listens on the caller's endpoint for the agent's ``ResultReply`` and,
between listens, checks (through a private endpoint, so a check never takes
the reply) that the actor system and the agent it asked still run; after an
agent restart it asks the successor. A result waited for is then handed to
this system's ``hy.CALLER`` stream of the invocation, if it follows one.
:class:`~hayata_py._async.AsyncAgentRef` waits the same way on an event loop,
with the same request numbers and check period and these ``_settle`` and
``_restarted_since``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import random
import time
from collections.abc import Callable
from typing import Any

from hayata_py._errors import HayataError, TimeoutError_
from hayata_py._ref_checks import alive, run_lost, system_died, waited_result
from hayata_py._ref_system import RefSystem
from hayata_py.messages import AgentResult, ResultReply, Run, WaitResult

_REFS = itertools.count(random.randrange(1, 2**31))
"""The numbers of this process's requests to agents (asks and waits, blocking or
asyncio): a reply names the one it answers."""
WAIT_CHECK_PERIOD = 0.5
"""How often a waiting :meth:`AgentRef.wait` checks that the agent still runs."""
REMOTE_ASK_TIMEOUT = 2.0
"""How long a look-up waits for an actor on another system."""


class Waiting:
    """:class:`~hayata_py._ref.AgentRef`'s waits for a result, across agent restarts."""

    system: RefSystem
    id: str
    _address: Any
    _pid: int | None
    _current_address: Callable[[], Any]

    def _wait(self, invocation_id: str, timeout: float, run: Run | None) -> AgentResult:
        """Wait for the invocation's ``ResultReply``, asked by ``run`` (a
        ``Run(wait=True)``) or else by a ``WaitResult``; after an agent restart,
        by a ``WaitResult`` to its successor."""
        deadline = time.monotonic() + timeout
        ref = next(_REFS)
        endpoint = self.system._system
        asked = self._current_address()
        endpoint.tell(asked, WaitResult(invocation_id, ref=ref) if run is None
                      else dataclasses.replace(run, ref=ref))
        probe: Any = None
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError_(f"invocation {invocation_id} of agent {self.id!r} "
                                        f"did not end within {timeout}s",
                                        invocation_id=invocation_id)
                reply = endpoint.listen(min(remaining, WAIT_CHECK_PERIOD))
                if isinstance(reply, ResultReply) and reply.ref == ref \
                        and reply.invocation_id == invocation_id:
                    break
                if run is not None and isinstance(reply, HayataError) \
                        and getattr(reply, "ref", None) == ref:
                    raise reply  # the agent refused the run
                if reply is None and not alive(endpoint.admin_pid):
                    raise system_died(self.system, invocation_id)
                if reply is None:
                    # Is the agent we asked still there? Asked through a private
                    # endpoint: on this one the checks would take (and drop) the
                    # reply we wait for if it arrived meanwhile.
                    probe = probe or endpoint.new_endpoint()
                    if self._restarted_since(asked, probe):
                        # Its successor answers (at once if the invocation now
                        # needs recover()).
                        asked = self._address
                        endpoint.tell(asked, WaitResult(invocation_id, ref=ref))
        finally:
            if probe is not None:
                with contextlib.suppress(Exception):
                    probe.exit_clone()
        if run is not None and not reply.known:
            raise run_lost(self.id, invocation_id)
        result = waited_result(reply, invocation_id)
        self._settle(invocation_id, result, asked, deadline)
        return result

    def _settle(self, invocation_id: str, result: AgentResult, source: Any,
               until: float) -> None:
        """Hand a waited-for result to this system's CALLER stream of the
        invocation (if it follows one from ``source``) and wait for the rest
        of that stream while its agent process runs."""
        inbox = self.system._inbox
        if not inbox.follows(invocation_id):
            return
        pid = self._pid if source == self._address else None
        give_up = time.monotonic() + REMOTE_ASK_TIMEOUT

        def sending() -> bool:
            return alive(pid) if pid is not None else time.monotonic() < give_up

        inbox.settle(invocation_id, result, until, sending, source)

    def _restarted_since(self, address: Any, probe: Any = None) -> bool:
        """True if the agent now runs as another process than ``address``
        (asked through ``probe``, default this thread's endpoint)."""
        try:
            current, pid = self.system._agent_address(self.id, via=probe,
                                                      timeout=REMOTE_ASK_TIMEOUT)
        except HayataError:
            return False  # between two processes, or no answer now: look again later
        if current != address:
            self._address, self._pid = current, pid
            return True
        return False
