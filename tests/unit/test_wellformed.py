"""The actors' check of a message's fields (``hayata_py/_actors/_wellformed.py``).

Found by the chaos campaign's garbage faults: a runtime message with fields of
the wrong type crashed the actor that handled it (the supervisor restarted it;
a restarted agent interrupts its invocation). Each actor now drops such a
message; ``tests/chaos/test_campaign.py::test_garbage_leaves_every_actor_running``
checks that on real processes.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from thespian.actors import ActorAddress

from hayata_py import _actor_messages as p
from hayata_py._actors._wellformed import bad_field
from hayata_py._invocation import DownCause
from tests.chaos.faults import protocol_types, wrong_fields

pytestmark = pytest.mark.timeout(60)
ADDR = ActorAddress("a-1")


def _checkable(cls: type) -> bool:
    return any(f.type not in ("Any", Any) or f.name in ("agent", "address", "watcher")
               for f in dataclasses.fields(cls))


@pytest.mark.parametrize("cls", [c for c in protocol_types() if _checkable(c)],
                         ids=lambda c: c.__name__)
def test_garbage_fields_are_named(cls: type) -> None:
    """Wrong types are caught (a garbage value of the right type, a stale id, is
    the handlers' business: they ignore ids they do not know)."""
    rng = random.Random(cls.__name__)
    assert sum(bad_field(wrong_fields(cls, rng)) is not None for _ in range(20)) >= 10


@pytest.mark.parametrize("message", [
    p.EdgeTable("n", 3, (p.EdgeRef("n.edge-1", ADDR),)),
    p.EnsureEdges(4),
    p.UseAgent(ADDR),
    p.NodeEvent("n", False, None, None, DownCause.CRASHED, "killed"),
    p.KillEdge("n.edge-1", p.KillReason.CANCELLED),
], ids=lambda m: type(m).__name__)
def test_well_formed_messages_pass(message: Any) -> None:
    assert bad_field(message) is None


@pytest.mark.parametrize(("message", "field"), [
    (p.EdgeTable("n", 3, (p.EdgeRef("n.edge-1", "not an address"),)), "edges"),
    (p.EdgeTable("n", True, ()), "version"),
    (p.EnsureEdges("4"), "count"),  # type: ignore[arg-type]
    (p.UseAgent(None), "address"),
    (p.KillEdge("n.edge-1", "cancelled"), "reason"),  # type: ignore[arg-type]
], ids=lambda x: x if isinstance(x, str) else type(x).__name__)
def test_the_bad_field_is_named(message: Any, field: str) -> None:
    assert bad_field(message) == field


def test_other_objects_are_not_checked() -> None:
    assert bad_field("text") is None and bad_field(object()) is None
