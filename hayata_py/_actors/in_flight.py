"""What the agent keeps for each invocation in flight, the small messages of its
group commit (plain data: no Thespian, no store), and what the agent's parts
may ask of the agent (:class:`AgentHost`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hayata_py import _invocation as m
from hayata_py._rules.map_link import MapLink
from hayata_py.messages import Run
from hayata_py.store import InvocationRecord


@dataclass
class InFlight:
    """One invocation in flight: its machine and what the agent keeps for it."""

    inv: m.Invocation
    token: int
    subscriber: Any
    folded: m.Checkpoint | None = None
    """The current step's checkpoint, not written here: it rides on every RunTask
    of the step and each edge commits it with its ``started``, in the same
    transaction (docs/design.md, "Fewer commits per step")."""
    map: MapLink | None = None
    """The reducer link of its map step, while one runs."""
    run_id: int = 0
    """This run's identity: its events and result carry it (``RunAccepted.run``)."""
    next_started: InvocationRecord | None = None
    """The run the store started with this one's end (its thread's next queued
    run), begun once this one has ended."""


@dataclass(frozen=True)
class Creating:
    """A run waiting for its invocation record (group commit)."""

    invocation_id: str
    run: Run
    sender: Any
    state: dict[str, Any]
    thread_version: int | None


@dataclass(frozen=True)
class Commit:
    """The agent to itself: carry out the creates and finishes gathered so far."""


@dataclass(frozen=True)
class Queued:
    """Who hears of an enqueued run once it starts (kept in memory only: after a
    restart an enqueued run starts without a subscriber; ``wait()`` finds it)."""

    subscriber: Any
    stream: bool




class AgentHost(Protocol):
    """What the agent's parts (admission, timers, node watch) ask of the agent
    actor, which owns the table of running invocations and carries out their
    machines' commands."""

    myAddress: Any

    def send(self, to: Any, message: Any) -> None:
        """Send ``message`` to ``to`` now."""

    def feed(self, run: InFlight, event: m.Event) -> None:
        """Step ``run``'s machine with ``event`` and carry out its commands."""

    def feed_all(self, event: m.Event) -> None:
        """Feed ``event`` to every running invocation."""

    def sends(self, sends: list[tuple[Any, Any]]) -> None:
        """Send to nodes, edges and reducers (through the outbox while batching)."""

    def reply(self, to: Any, request: Any, answer: Any) -> None:
        """Answer ``request`` of ``to`` (carrying its ``ref``)."""

    def outcome(self, message: Any) -> None:
        """Take a task's outcome (``Outcome``) as if its edge had sent it."""
