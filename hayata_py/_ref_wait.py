"""How :meth:`AgentRef.wait <hayata_py._ref.AgentRef.wait>` and
:meth:`~hayata_py._ref.AgentRef.invoke` wait for an invocation's end.

A blocking wait (:func:`blocking_wait`) waits on the calling thread's
endpoint (:func:`wait`), the shortest way, unless
:data:`OWN_ENDPOINT_WAITS` waits of this process on the system already do;
then it waits through the system's receiver (:func:`received`), so a
thousand threads waiting at once share one endpoint and the agent answers
one address, not one per thread.

The wait listens on the caller's endpoint for the agent's ``ResultReply`` and,
between listens, checks (through a private endpoint, so a check never takes
the reply) that the actor system and the agent it asked still run; after an
agent restart it asks the successor. A result waited for is then handed to
this system's ``hy.CALLER`` stream of the invocation, if it follows one.
:class:`~hayata_py._async.AsyncAgentRef` waits the same way on an event loop,
with the same request numbers and check period and these :func:`settle`,
:func:`agent_now` (one look-up of the agent serves all the waits on it) and
:func:`moved`. The functions take the ref through :class:`WaitingRef`:
``_ref`` imports this module, never the other way.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import itertools
import random
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

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
LOOKUP_FRESH = WAIT_CHECK_PERIOD / 2
"""How long one look-up of an agent's process answers every wait on it: the
waits on one agent (a thousand invocations at once) ask its supervisor a few
times a second between them, not each twice a second."""


class WaitingRef(Protocol):
    """What the waits use of an :class:`~hayata_py._ref.AgentRef`."""

    system: RefSystem
    id: str
    _address: Any
    _pid: int | None

    def _current_address(agent) -> Any: ...


OWN_ENDPOINT_WAITS = 16
"""How many blocking waits of a process on one system wait on their threads'
own endpoints at once; the ones beyond wait through the system's receiver."""
_WAITING: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""How many blocking waits of this process are under way, per system."""
_WAITING_LOCK = threading.Lock()


def blocking_wait(agent: WaitingRef, invocation_id: str, timeout: float, run: Run | None
                  ) -> AgentResult:
    """The wait of a blocking call (``wait``, ``invoke``): :func:`wait` on this
    thread's endpoint while fewer than :data:`OWN_ENDPOINT_WAITS` other waits
    of this process on the system are under way, else :func:`received`. The
    same replies, checks and errors either way. The first costs a caller
    less (no hand-over to the receiver's thread: a lone finish-only
    ``invoke`` 1.13 against 1.27 ms; four threads waiting in turn for 1,000
    runs, 25% less CPU); the second keeps a crowd of threads from each
    making an endpoint that the agent then answers, and from each blocking
    in a ``tell`` until the busy agent takes its message in."""
    system = agent.system
    with _WAITING_LOCK:
        others = _WAITING.get(system, 0)
        _WAITING[system] = others + 1
    try:
        if others >= OWN_ENDPOINT_WAITS:
            return received(agent, invocation_id, timeout, run)
        return wait(agent, invocation_id, timeout, run)
    finally:
        with _WAITING_LOCK:
            _WAITING[system] -= 1


def wait(agent: WaitingRef, invocation_id: str, timeout: float, run: Run | None) -> AgentResult:
    """Wait for the invocation's ``ResultReply``, asked by ``run`` (a
    ``Run(wait=True)``) or else by a ``WaitResult``; after an agent restart,
    by a ``WaitResult`` to its successor."""
    deadline = time.monotonic() + timeout
    ref = next(_REFS)
    endpoint = agent.system._system
    asked = agent._current_address()
    endpoint.tell(asked, WaitResult(invocation_id, ref=ref) if run is None
                  else dataclasses.replace(run, ref=ref))
    probe: Any = None
    answered = False
    try:
        while True:
            remaining = time_left(deadline, agent.id, invocation_id, timeout)
            reply = endpoint.listen(min(remaining, WAIT_CHECK_PERIOD))
            if isinstance(reply, ResultReply) and reply.ref == ref \
                    and reply.invocation_id == invocation_id:
                break
            if run is not None and isinstance(reply, HayataError) \
                    and getattr(reply, "ref", None) == ref:
                raise reply  # the agent refused the run
            if reply is None and not alive(endpoint.admin_pid):
                raise system_died(agent.system, invocation_id)
            if reply is None:
                # Is the agent we asked still there? Asked through a private
                # endpoint (made when this wait is the one to ask): on this one
                # the checks would take (and drop) the reply we wait for if it
                # arrived meanwhile.
                def private() -> Any:
                    nonlocal probe
                    probe = probe or endpoint.new_endpoint()
                    return probe

                if moved(agent, asked, agent_now(agent, private)):
                    # Its successor answers (at once if the invocation now
                    # needs recover()).
                    asked = agent._address
                    endpoint.tell(asked, WaitResult(invocation_id, ref=ref))
        answered = True
    finally:
        if probe is not None:
            with contextlib.suppress(Exception):
                probe.exit_clone()
        if not answered:
            # The reply may still come, to an endpoint nobody reads until this
            # thread listens again: unread, it would hold one of the agent's
            # few sends in flight (supervisors.System.drop_endpoint).
            endpoint.drop_endpoint()
    if run is not None and not reply.known:
        raise run_lost(agent.id, invocation_id)
    result = waited_result(reply, invocation_id)
    settle(agent, invocation_id, result, asked, deadline)
    return result


def received(agent: WaitingRef, invocation_id: str, timeout: float, run: Run | None
             ) -> AgentResult:
    """:func:`wait` through this system's receiver, as
    :class:`~hayata_py._async.AsyncAgentRef` waits: the request goes out
    without waiting for the agent to take it, and the reply comes back on the
    receiver's endpoint. Many threads waiting at once (a thousand ``invoke``
    calls) then share one endpoint instead of making one each, every ``tell``
    of which blocks until the busy agent takes it in."""
    deadline = time.monotonic() + timeout
    inbox, receiver = agent.system._caller_inbox()
    asked = agent._current_address()
    ref = next(_REFS)
    future = inbox.expect_reply(ref)
    ask = asker(receiver, lambda: future)
    try:
        ask(asked, WaitResult(invocation_id, ref=ref) if run is None
            else dataclasses.replace(run, ref=ref))
        while True:
            remaining = time_left(deadline, agent.id, invocation_id, timeout)
            try:
                reply, done = future.result(min(remaining, WAIT_CHECK_PERIOD)), True
            except concurrent.futures.TimeoutError:
                reply, done = None, False
            if isinstance(reply, ResultReply) and reply.invocation_id == invocation_id:
                break
            if run is not None and isinstance(reply, HayataError):
                raise reply  # the agent refused the run
            if done:  # undeliverable (or a stray answer): look for a successor now
                future = inbox.expect_reply(ref)
            if not admin_alive(agent.system):
                raise system_died(agent.system, invocation_id)
            # asked through this thread's endpoint: the reply does not come to it
            if moved(agent, asked, agent_now(agent)):
                asked = agent._address
                ask(asked, WaitResult(invocation_id, ref=ref))
    finally:
        inbox.drop_reply(ref)
    if run is not None and not reply.known:
        raise run_lost(agent.id, invocation_id)
    result = waited_result(reply, invocation_id)
    settle(agent, invocation_id, result, asked, deadline)
    return result


def asker(receiver: Any, current: Callable[[], concurrent.futures.Future[Any]]
          ) -> Callable[[Any, Any], None]:
    """Send through the system's ``receiver``; a message it cannot deliver ends
    the reply's future of the moment it was sent (``current()``: a wait makes a
    new one after each undeliverable send) with None: look the agent up again."""

    def ask(address: Any, message: Any) -> None:
        pending = current()

        def undeliverable(_status: Any) -> None:
            if not pending.done():
                pending.set_result(None)

        receiver.send(address, message, undeliverable)

    return ask


def time_left(deadline: float, agent_id: str, invocation_id: str, timeout: float) -> float:
    """Seconds left of a wait for the invocation's result (sync or asyncio) until
    ``deadline`` (``time.monotonic()``); :class:`TimeoutError_` once none are."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError_(f"invocation {invocation_id} of agent {agent_id!r} "
                            f"did not end within {timeout}s", invocation_id=invocation_id)
    return remaining


def settle(agent: WaitingRef, invocation_id: str, result: AgentResult, source: Any,
           until: float) -> None:
    """Hand a waited-for result to this system's CALLER stream of the
    invocation (if it follows one from ``source``) and wait for the rest
    of that stream while its agent process runs."""
    inbox = agent.system._inbox
    if not inbox.follows(invocation_id):
        return
    pid = agent._pid if source == agent._address else None
    give_up = time.monotonic() + REMOTE_ASK_TIMEOUT

    def sending() -> bool:
        return alive(pid) if pid is not None else time.monotonic() < give_up

    inbox.settle(invocation_id, result, until, sending, source)


class _Lookup:
    """The latest look-up of one agent's process, shared by the waits on it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at = -LOOKUP_FRESH
        self.found: tuple[Any, int | None] | None = None


_LOOKUPS: weakref.WeakKeyDictionary[Any, dict[str, _Lookup]] = weakref.WeakKeyDictionary()
_LOOKUPS_LOCK = threading.Lock()


def agent_now(agent: WaitingRef, probe: Callable[[], Any] | None = None
              ) -> tuple[Any, int | None] | None:
    """The agent's current address and pid (asked through the endpoint
    ``probe()`` gives, default this thread's), or None when there is no answer
    now (between two processes, or another wait is asking): one answer, at
    most :data:`LOOKUP_FRESH` s old, serves every wait of this process on the
    agent, and no wait blocks on another's ask."""
    with _LOOKUPS_LOCK:
        lookup = _LOOKUPS.setdefault(agent.system, {}).setdefault(agent.id, _Lookup())
    if time.monotonic() - lookup.at < LOOKUP_FRESH:
        return lookup.found
    if not lookup.lock.acquire(blocking=False):
        return None  # another wait asks now: no answer yet, this one listens on
    try:
        if time.monotonic() - lookup.at < LOOKUP_FRESH:
            return lookup.found
        try:
            found = agent.system._agent_address(
                agent.id, via=probe() if probe is not None else None,
                timeout=REMOTE_ASK_TIMEOUT)
        except HayataError:
            found = None
        lookup.found, lookup.at = found, time.monotonic()
        return found
    finally:
        lookup.lock.release()


_ADMIN_SEEN: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def admin_alive(system: RefSystem) -> bool:
    """Whether the actor system's admin runs: looked at (one read of
    ``/proc``) at most every :data:`LOOKUP_FRESH` s for all the waits of this
    process on ``system``."""
    now = time.monotonic()
    if now - _ADMIN_SEEN.get(system, -LOOKUP_FRESH) < LOOKUP_FRESH:
        return True
    if alive(system.admin_pid):
        _ADMIN_SEEN[system] = now
        return True
    return False


def moved(agent: WaitingRef, address: Any, found: tuple[Any, int | None] | None) -> bool:
    """True if ``found`` (:func:`agent_now`) is another process than
    ``address``; the handle then asks that one."""
    if found is None:
        return False  # between two processes, or no answer now: look again later
    current, pid = found
    if current != address:
        agent._address, agent._pid = current, pid
        return True
    return False
