"""Actor classes for the supervision benchmarks.

They live in an importable module because every actor process imports its
class by dotted path (``benchmarks.actors.AnnouncingWorker``).

Timestamps are ``time.monotonic()`` (Linux ``CLOCK_MONOTONIC``, one clock for
every process on the machine), taken inside the actor processes, so an
interval measured across processes does not include the outside caller's
``ask`` round trips.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from thespian.actors import Actor, ActorExitRequest, ChildActorExited

from supervisors import SupervisedActor, Supervisor

# -- messages ---------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """Sent by an announcing worker from ``on_start``: "a new incarnation is up"."""

    pid: int
    t_init: float
    t_start: float


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class Pong:
    """Answer to :class:`Ping`: ``t_handled`` is when the actor handled the ping."""

    pid: int
    t_init: float
    t_handled: float


@dataclass(frozen=True)
class Arm:
    """Forget the last replacement; the next one to answer is the result."""


@dataclass(frozen=True)
class AwaitReplacement:
    """Answered with a :class:`Replacement` once a new incarnation has answered."""


@dataclass(frozen=True)
class Replacement:
    """Stamps of one replacement (``nan`` where a stage does not apply)."""

    pid: int
    t_exit: float  # the parent received ChildActorExited (bare parent only)
    t_init: float  # the new actor object was constructed
    t_start: float  # its on_start ran (supervised only)
    t_handled: float  # it handled the observer's Ping
    t_pong: float  # its Pong reached the observer


@dataclass(frozen=True)
class GetExitStamps:
    """Ask a :class:`TimedSupervisor` for its ChildActorExited arrival stamps."""


@dataclass(frozen=True)
class StartBare:
    """Ask a :class:`BareParent` to start its restartable child; answered with its pid."""


@dataclass(frozen=True)
class SpawnProbe:
    """Ask a :class:`BareParent` to create a throw-away child and ping it; answered
    with ``(seconds until its Pong arrived, seconds until it handled the Ping)``."""


@dataclass(frozen=True)
class SpawnMany:
    """Ask a :class:`BareParent` to create ``n`` idle children; answered with their pids."""

    n: int


NAN = float("nan")


# -- supervised side --------------------------------------------------------


class AnnouncingWorker(SupervisedActor):
    """A supervised worker that tells ``listener`` when it starts and answers Ping."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.t_init = time.monotonic()
        super().__init__(*args, **kwargs)

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        listener = args[0]
        self.send(listener, Hello(os.getpid(), self.t_init, time.monotonic()))

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, Ping):
            self.send(sender, Pong(os.getpid(), self.t_init, time.monotonic()))


class IdleWorker(SupervisedActor):
    """A supervised worker that does nothing but answer Ping (for memory figures)."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, Ping):
            self.send(sender, Pong(os.getpid(), NAN, time.monotonic()))


class TimedSupervisor(Supervisor):
    """A plain supervisor that also stamps each ``ChildActorExited`` it receives
    (one list append before the normal handling)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exit_stamps: list[float] = []

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildActorExited):
            self.exit_stamps.append(time.monotonic())
        super().receiveMessage(message, sender)

    def on_message(self, message: Any, sender: Any) -> None:
        if isinstance(message, GetExitStamps):
            self.send(sender, list(self.exit_stamps))
        else:
            super().on_message(message, sender)


class Listener(Actor):  # type: ignore[misc]
    """Pings every worker that says Hello and records when its Pong arrives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starts: dict[int, float] = {}
        self.result: Replacement | None = None
        self.waiter: Any = None

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, Hello):
            self.starts[message.pid] = message.t_start
            self.send(sender, Ping())
        elif isinstance(message, Pong):
            now = time.monotonic()
            self.result = Replacement(message.pid, NAN, message.t_init,
                                      self.starts.pop(message.pid, NAN), message.t_handled, now)
            self._answer()
        elif isinstance(message, Arm):
            self.result, self.waiter = None, None
            self.send(sender, True)
        elif isinstance(message, AwaitReplacement):
            self.waiter = sender
            self._answer()

    def _answer(self) -> None:
        if self.result is not None and self.waiter is not None:
            self.send(self.waiter, self.result)
            self.result, self.waiter = None, None


# -- bare Thespian side (the floor) -------------------------------------------


class BareChild(Actor):  # type: ignore[misc]
    """A plain Thespian actor that answers Ping."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.t_init = time.monotonic()
        super().__init__(*args, **kwargs)

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, Ping):
            self.send(sender, Pong(os.getpid(), self.t_init, time.monotonic()))


class BareParent(Actor):  # type: ignore[misc]
    """The least a restart can cost in Thespian: on ``ChildActorExited`` of its
    child it creates a new one at once and pings it (no protocol, no policy)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.child: Any = None
        self.t_exit = NAN
        self.starter: Any = None
        self.result: Replacement | None = None
        self.waiter: Any = None
        self.probe: Any = None
        self.probe_t0 = NAN
        self.probe_asker: Any = None
        self.many: list[Any] = []
        self.many_pids: list[int] = []
        self.many_asker: Any = None

    def _new_child(self) -> None:
        self.child = self.createActor(BareChild)
        self.send(self.child, Ping())

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildActorExited):
            if self.child is not None and message.childAddress == self.child:
                self.t_exit = time.monotonic()
                self._new_child()
        elif isinstance(message, Pong):
            self._on_pong(message, sender)
        elif isinstance(message, StartBare):
            self.starter = sender
            self._new_child()
        elif isinstance(message, Arm):
            self.result, self.waiter, self.t_exit = None, None, NAN
            self.send(sender, True)
        elif isinstance(message, AwaitReplacement):
            self.waiter = sender
            self._answer()
        elif isinstance(message, SpawnProbe):
            self.probe_asker = sender
            self.probe_t0 = time.monotonic()
            self.probe = self.createActor(BareChild)
            self.send(self.probe, Ping())
        elif isinstance(message, SpawnMany):
            self.many_asker, self.many_pids = sender, []
            self.many = [self.createActor(BareChild) for _ in range(message.n)]
            for child in self.many:
                self.send(child, Ping())

    def _on_pong(self, message: Pong, sender: Any) -> None:
        now = time.monotonic()
        if self.probe is not None and sender == self.probe:
            self.send(self.probe_asker, (now - self.probe_t0, message.t_handled - self.probe_t0))
            self.send(self.probe, ActorExitRequest())
            self.probe = None
        elif self.child is not None and sender == self.child:
            if self.starter is not None:
                self.send(self.starter, message.pid)
                self.starter = None
                return
            self.result = Replacement(message.pid, self.t_exit, message.t_init, NAN,
                                      message.t_handled, now)
            self._answer()
        elif any(sender == child for child in self.many):
            self.many_pids.append(message.pid)
            if len(self.many_pids) == len(self.many):
                self.send(self.many_asker, list(self.many_pids))

    def _answer(self) -> None:
        if self.result is not None and self.waiter is not None:
            self.send(self.waiter, self.result)
            self.result, self.waiter = None, None
