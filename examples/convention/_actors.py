# ruff: noqa: E501
"""Actors used by the convention prototypes (importable by name in every system).

- :class:`Worker`: a plain Thespian actor that only a system declaring
  ``gpu=True`` accepts (``actorSystemCapabilityCheck``).
- :class:`PlacedWorker`: a ``SupervisedActor`` whose placement is generic: it
  accepts a system iff every ``targetActorRequirements`` item equals the
  system's capability of that name (what a ``requirements`` field in
  ``Start``/``ChildSpec`` would need).
- :class:`GpuChild`: a ``SupervisedActor`` that only a ``gpu`` system accepts
  (so an unmodified ``Supervisor`` places it remotely).
- :class:`Probe`: lives on the leader; creates a remote child, records every
  event it sees (ChildActorExited, PoisonMessage, DeadEnvelope, convention
  updates, heartbeat verdicts) with wall-clock timestamps.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from thespian.actors import (
    Actor,
    ActorExitRequest,
    ActorSystemConventionUpdate,
    ChildActorExited,
    DeadEnvelope,
    PoisonMessage,
    WakeupMessage,
)

from supervisors import SupervisedActor


def _info() -> dict[str, int]:
    return {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0)}


@dataclass(frozen=True)
class Ping:
    seq: int
    sent: float


@dataclass(frozen=True)
class Pong:
    seq: int
    sent: float


@dataclass(frozen=True)
class Spawn:
    actor_path: str
    requirements: dict[str, Any] | None = None


@dataclass(frozen=True)
class Heartbeat:
    period: float  # seconds between pings
    misses: int  # pings without answer before the child is declared dead


@dataclass(frozen=True)
class CallBack:
    """Ask the child to send ``Pong`` to ``target`` (remote -> leader direction)."""

    target: Any
    sent: float


@dataclass
class Events:
    items: list[tuple[float, str, Any]] = field(default_factory=list)


def requirements_match(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
    return all(capabilities.get(k) == v for k, v in (requirements or {}).items())


class Worker(Actor):  # type: ignore[misc]
    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        return bool(capabilities.get("gpu")) and requirements_match(capabilities, requirements)

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if message == "info":
            self.send(sender, _info())
        elif isinstance(message, Ping):
            self.send(sender, Pong(message.seq, message.sent))
        elif isinstance(message, CallBack):
            self.send(message.target, Pong(-1, message.sent))


class PlacedWorker(SupervisedActor):
    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        return requirements_match(capabilities, requirements)

    def on_receive(self, message: Any, sender: Any) -> None:
        if message == "info":
            self.send(sender, _info())
        elif isinstance(message, Ping):
            self.send(sender, Pong(message.seq, message.sent))
        elif message == "crash":
            raise RuntimeError("asked to crash")


class GpuChild(PlacedWorker):
    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        return bool(capabilities.get("gpu"))


class Probe(Actor):  # type: ignore[misc]
    """Leader-side observer; see the module docstring."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        now = time.time()
        if not hasattr(self, "events"):
            self.events: list[tuple[float, str, Any]] = []
            self.child: Any = None
            self.asker: Any = None
            self.hb: Heartbeat | None = None
            self.seq = 0
            self.last_pong = 0.0
            self.declared = False
        if message == "watch":
            self.notifyOnSystemRegistrationChanges(True)
            self.handleDeadLetters(True)
            self.send(sender, "ok")
        elif isinstance(message, Spawn):
            self.asker = sender
            self.child = self.createActor(message.actor_path,
                                          targetActorRequirements=message.requirements)
            self.events.append((now, "create_called", None))
            self.send(self.child, "info")
        elif isinstance(message, dict) and "pid" in message:
            self.events.append((now, "child_info", message))
            if self.asker is not None:
                self.send(self.asker, message)
                self.asker = None
        elif isinstance(message, Heartbeat):
            self.hb, self.declared, self.last_pong = message, False, now
            self.wakeupAfter(timedelta(seconds=message.period), "hb")
            self.send(sender, "ok")
        elif isinstance(message, WakeupMessage) and message.payload == "hb" and self.hb:
            if not self.declared and now - self.last_pong > self.hb.period * self.hb.misses:
                self.declared = True
                self.events.append((now, "heartbeat_dead", self.last_pong))
            if not self.declared:
                self.seq += 1
                self.send(self.child, Ping(self.seq, now))
                self.wakeupAfter(timedelta(seconds=self.hb.period), "hb")
        elif isinstance(message, Pong):
            self.last_pong = now
            if message.seq == -1:
                self.events.append((now, "callback_pong", now - message.sent))
        elif message == "send_to_child":
            self.send(self.child, Ping(0, now))
            self.events.append((now, "sent_to_dead_child", None))
            self.send(sender, "ok")
        elif message == "callback":
            self.send(self.child, CallBack(self.myAddress, now))
            self.send(sender, "ok")
        elif message == "events":
            self.send(sender, Events(list(self.events)))
        elif isinstance(message, ChildActorExited):
            self.events.append((now, "ChildActorExited", str(message.childAddress)))
            if self.asker is not None:  # the child never started (e.g. no system matched)
                self.send(self.asker, "child_exited")
                self.asker = None
        elif isinstance(message, PoisonMessage):
            self.events.append((now, "PoisonMessage", type(message.poisonMessage).__name__))
        elif isinstance(message, DeadEnvelope):
            self.events.append((now, "DeadEnvelope", type(message.deadMessage).__name__))
        elif isinstance(message, ActorSystemConventionUpdate):
            self.events.append((now, "convention_update",
                                (str(message.remoteAdminAddress), message.remoteAdded)))
        elif isinstance(message, ActorExitRequest):
            pass
