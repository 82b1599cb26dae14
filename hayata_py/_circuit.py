"""Circuit breakers: the user's setting (:class:`CircuitBreaker`) and what an
agent reports of one (:class:`CircuitStatus`). The breaker itself is pure
code in :mod:`hayata_py._rules.circuits`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hayata_py._errors import ConfigError

CIRCUIT_OPEN = "circuit_open"
"""The error code of a task refused by an open circuit (never sent to an edge)."""

MAX_SECONDS = 365 * 24 * 3600
"""The longest ``window`` or ``cool_down`` accepted (seconds)."""


@dataclass(frozen=True)
class CircuitBreaker:
    """Stop calling a node that keeps failing, for a while (``AgentConfig.circuit``).

    The agent holds one breaker per node, shared by all its invocations. After
    ``failures`` recorded failures of the node (``node_failed``: the function
    raised, or its edge died) within ``window`` seconds, the circuit *opens*:
    each task of the node then fails at once with ``circuit_open``, a recorded
    failure, without being sent to an edge. A node with a retry policy waits
    for the cool-down instead (a ``circuit_open`` failure is not an attempt).
    ``cool_down`` seconds after it opened, the circuit is *half-open*: one
    task (the probe) is let through; its success closes the circuit, its
    failure opens it again for another cool-down.

    - ``failures``: failures that open the circuit (an int >= 1).
    - ``window``: seconds within which they count (> 0, finite).
    - ``cool_down``: seconds the circuit stays open before its probe (> 0, finite).
    """

    failures: int = 5
    window: float = 60.0
    cool_down: float = 30.0

    def __post_init__(self) -> None:
        if isinstance(self.failures, bool) or not isinstance(self.failures, int) \
                or not 1 <= self.failures <= 1_000_000:
            raise ConfigError("failures", "must be a positive int (failures that open the "
                              f"circuit), got {self.failures!r}")
        for name in ("window", "cool_down"):
            value: Any = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
                raise ConfigError(name, "must be a positive finite number of seconds (at "
                                  f"most 365 days), got {value!r}")
            object.__setattr__(self, name, float(value))


def checked(value: Any, where: str) -> CircuitBreaker:
    """``AgentConfig.circuit[node]``: a :class:`CircuitBreaker`, its fields checked
    again (a field error names ``circuit['node'].field``)."""
    if not isinstance(value, CircuitBreaker):
        raise ConfigError(where, f"must be a hy.CircuitBreaker, got {type(value).__name__}")
    try:
        return CircuitBreaker(value.failures, value.window, value.cool_down)
    except ConfigError as exc:
        raise ConfigError(f"{where}.{exc.details['field']}",
                          str(exc).partition(": ")[2]) from exc


@dataclass(frozen=True)
class CircuitStatus:
    """One node's breaker as its agent holds it (``AgentStatus.circuits``).

    ``state``: ``closed``, ``open`` (its tasks fail with ``circuit_open``) or
    ``half_open`` (the cool-down is over: the next task, or the one out, is the
    probe); ``failures``: recorded failures within the window while closed, or
    those that opened it; ``retry_after``: seconds left of the cool-down (0
    unless open)."""

    node_id: str
    state: str
    failures: int
    retry_after: float = 0.0


def summary(circuits: tuple[CircuitStatus, ...]) -> str:
    """One line for a listing: ``llm open (5 failures, 12 s left), search closed``."""
    parts = []
    for c in circuits:
        left = f", {c.retry_after:.0f} s left" if c.state == "open" else ""
        parts.append(f"{c.node_id} {c.state.replace('_', '-')} ({c.failures} failures{left})")
    return ", ".join(parts) or "-"


def as_json(circuits: tuple[CircuitStatus, ...]) -> dict[str, Any]:
    """The ``circuits`` entry of a JSON listing (nothing for an agent without breakers)."""
    if not circuits:
        return {}
    return {"circuits": [{"node_id": c.node_id, "state": c.state, "failures": c.failures,
                          "retry_after": round(c.retry_after, 3)} for c in circuits]}
