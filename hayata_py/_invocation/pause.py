"""Human-in-the-loop pauses: pure decisions on where an invocation waits.

An invocation pauses when the policy answers ``hy.Pause(payload)``, before a
step whose nodes include one in ``pause_before`` (its checkpoint names the
step, nothing of it has started) or after a step with a node in
``pause_after`` (its results are recorded and merged, the next decision
waits). The pause is written durably (the checkpoint, with :class:`Hold` in
it) before anyone is told; ``resume()`` continues from there.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from hayata_py._errors import ErrorInfo


class PauseKind(enum.Enum):
    POLICY = "policy"
    """The policy answered ``hy.Pause(payload)``: resume goes on to the next decision."""
    BEFORE = "before"
    """``pause_before``: resume runs the held step (nothing of it ran)."""
    AFTER = "after"
    """``pause_after``: the step completed; resume goes on to the next decision."""


@dataclass(frozen=True)
class Hold:
    """Why and where an invocation waits (stored with its checkpoint)."""

    kind: PauseKind
    payload: Any = None
    nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "payload": self.payload, "nodes": list(self.nodes)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hold:
        return cls(PauseKind(data["kind"]), data.get("payload"), tuple(data.get("nodes", ())))


def breakpoint_at(breakpoints: Collection[str], nodes: tuple[str, ...], kind: PauseKind
                  ) -> Hold | None:
    """The pause of a step whose nodes meet ``breakpoints`` (``pause_before`` or
    ``pause_after``), or None. Its payload names the nodes and the side."""
    hit = tuple(n for n in nodes if n in breakpoints)
    if not hit:
        return None
    return Hold(kind, {f"pause_{kind.value}": list(hit)}, hit)


def event_data(hold: Hold) -> dict[str, Any]:
    """The ``invocation_paused`` event's data."""
    return {"payload": hold.payload, "kind": hold.kind.value, "nodes": list(hold.nodes)}


def paused_error(invocation_id: str, hold: Hold) -> ErrorInfo:
    """What the run ended with: not a failure; the invocation waits for resume()."""
    return ErrorInfo("invocation_paused", f"invocation {invocation_id} is paused "
                     f"({hold.kind.value}); call resume({invocation_id!r}, value)",
                     {**event_data(hold), "invocation_id": invocation_id,
                      "recoverable": True})
