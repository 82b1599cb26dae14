"""Which actors this process is still sending to: the one look into Thespian's
TCP transport the actors take (the caller's :mod:`hayata_py._receiver` is the
other module that touches its internals; both pinned by ``thespian<5``).

Thespian carries one message at a time to each actor and keeps the rest in a
list it walks on every turn of its loop, so a long list costs a busy actor
CPU on every message it handles. A batching agent holds its sends to an
actor that has one in flight and sends them together once it has none
(:class:`~hayata_py._rules.outbox.Outbox`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["busy_targets"]


def busy_targets(actor: Any) -> set[Any]:
    """The ``addressDetails`` of every actor with a send of ``actor``'s process
    in flight or waiting. Empty if the transport is not Thespian's TCP one (or
    its internals changed): then nothing is held back."""
    transport = getattr(getattr(actor, "_myRef", None), "transport", None)
    active = getattr(transport, "_transmitIntents", None)
    waiting = getattr(transport, "_waitingTransmits", None)
    if not isinstance(active, dict) or not isinstance(waiting, list):
        return set()
    busy: set[Any] = set()
    for intent in (*active.values(), *waiting):
        details = getattr(getattr(intent, "targetAddr", None), "addressDetails", None)
        if details is not None:
            busy.add(details)
    return busy
