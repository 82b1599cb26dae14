"""The data an invocation machine holds: its phase, its settings, its running step.

Plain data, shared by :mod:`~hayata_py._invocation.machine` and
:mod:`~hayata_py._invocation.mapping` (map steps).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hayata_py._invocation.compensation import History
from hayata_py._invocation.events import TaskKey, TaskOutcome
from hayata_py._invocation.retry import RetryPlan
from hayata_py._policy import RetryPolicy


class Phase(enum.Enum):
    NEW = "new"
    DECIDING = "deciding"
    """Waiting for the policy's answer."""
    SAVING = "saving"
    """Waiting for the step's checkpoint to be committed."""
    RUNNING = "running"
    """A step's tasks are out (or a map step waits for its reducer)."""
    PAUSING = "pausing"
    """Waiting for the pause to be committed."""
    COMPENSATING = "compensating"
    """Failing: its compensations run, one at a time (``compensating.py``)."""
    FINISHING = "finishing"
    """Waiting for the terminal result to be committed."""
    ENDED = "ended"


def no_reduce_check(path: str) -> str | None:
    """The default ``Rules.reduce_check``: every reduce path is taken as importable."""
    return None


@dataclass(frozen=True)
class Rules:
    """The agent's settings that shape an invocation."""

    nodes: frozenset[str]
    max_steps: int
    execution_timeout: float
    durable: bool = True
    """The agent records its work: an interruption keeps the invocation for recover()."""
    owner: str = ""
    """The lease owner (named in ``ownership_lost``)."""
    map_concurrency: int = 1
    """Items of a map step run at once, at most (the edges a map step asks for)."""
    map_window: Mapping[str, int] = field(default_factory=dict)
    """Node id -> items of its map step out at once (sent to an edge or waiting
    for one), at most; else ``map_concurrency``. The agent sends a one-task
    edge of a fast node several items of a step at once (a chain), so it
    sets a larger window for those nodes; they still run ``map_concurrency``
    at once."""
    reduce_check: Callable[[str], str | None] = no_reduce_check
    """Why a map's reduce path cannot be imported, or None (the agent imports it;
    the machine itself imports nothing)."""
    node_timeouts: Mapping[str, float] = field(default_factory=dict)
    """Node id -> seconds one run of it may take (else ``execution_timeout``)."""
    retry: Mapping[str, RetryPolicy] = field(default_factory=dict)
    """Node id -> its retry policy (nodes without one are not retried)."""
    pause_before: frozenset[str] = frozenset()
    pause_after: frozenset[str] = frozenset()
    compensate: Mapping[str, str] = field(default_factory=dict)
    """Node id -> its compensator's import path (``AgentConfig.compensate``)."""

    def timeout_for(self, node_id: str) -> float:
        return self.node_timeouts.get(node_id, self.execution_timeout)


@dataclass(frozen=True)
class Seed:
    """Where an invocation starts (step 0, or a recovered checkpoint)."""

    invocation_id: str
    input: Any
    state: dict[str, Any]
    stream: bool = False
    step: int = 0
    last_result: Any = None
    parallel_results: list[Any] | None = None
    resume_value: Any = None
    """What ``resume()`` was given: the next decision sees it."""
    thread: str | None = None
    """The conversation thread the invocation runs on (``ctx.thread``)."""
    sequence: int = 0
    """The last event sequence the invocation's log already holds: a recovered or
    resumed run numbers its events on from it."""
    compensation: History = field(default_factory=History)
    """What earlier runs completed and undid (from the task records): what a
    failure of this run still has to undo."""


@dataclass
class Task:
    key: TaskKey
    task_id: str
    partials_seen: int = 0
    held: TaskOutcome | None = None
    """A successful outcome that waits for its partial results."""
    attempt: int = 1
    retry: RetryPlan | None = None
    """Set while the task waits for its next attempt (its backoff)."""


@dataclass
class MapRun:
    """The items of one map step and where each stands."""

    node_id: str
    items: list[Any]
    reduce: str | None
    task_ids: tuple[str, ...]
    queue: list[tuple[int, int]]
    """(item, attempt) not yet sent, in item order."""
    results: dict[int, Any] = field(default_factory=dict)
    consolidating: bool = False
    """Every item is done; the reducer's answer is awaited."""


@dataclass
class Execution:
    id: str
    nodes: tuple[str, ...]
    input: Any
    parallel: bool
    pending: dict[TaskKey, Task] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    map: MapRun | None = None
    """Set for a map step."""


def execution_id_for(invocation_id: str, step: int) -> str:
    return f"{invocation_id}:{step}"
