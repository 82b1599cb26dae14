"""An actor that tells which of ``supervisors``' Thespian patches its process
runs: the patch tests ask one, forked like every actor."""

from __future__ import annotations

import os
from typing import Any

from thespian.actors import Actor, ActorExitRequest

from supervisors import System


class PatchProbe(Actor):  # type: ignore[misc]
    def receiveMessage(self, message: Any, sender: Any) -> None:
        if message == "which":
            import thespian.system.transport.TCPTransport as transport
            from thespian.system.multiprocCommon import MultiProcManager
            from thespian.system.transport.IPBase import IPActorAddress

            from supervisors._poll import _SELECTORS_SHIM
            from supervisors._tcpaddr import address_state
            from supervisors._tcploop import run_with_expiry
            from supervisors._tcpread import handle_readable_incoming, next_xmit_4

            self.send(sender, (os.getpid(), {
                "selector": transport.selectors is _SELECTORS_SHIM,
                "loop": transport.TCPTransport._runWithExpiry is run_with_expiry,
                "read": (transport.TCPTransport._handleReadableIncoming
                         is handle_readable_incoming
                         and transport.TCPTransport._next_XMIT_4 is next_xmit_4),
                "stack": getattr(MultiProcManager.run, "_supervisors_patched", False),
                "address": IPActorAddress.__getstate__ is address_state}))


def patches_in_an_actor(system: System) -> dict[str, bool]:
    """Which patches an actor process of ``system`` runs (asked of a fresh one)."""
    probe = system.thespian.createActor(PatchProbe)
    try:
        pid, patched = system.thespian.ask(probe, "which", 10)
    finally:
        system.thespian.tell(probe, ActorExitRequest())
    assert pid != os.getpid(), "the probe ran in the caller's process"
    return dict(patched)
