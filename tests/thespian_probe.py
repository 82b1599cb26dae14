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
            from supervisors._thespian.installer import in_force
            from supervisors._thespian.patch_table import PATCHES

            self.send(sender, (os.getpid(), {p.name: in_force(p) for p in PATCHES}))


def patches_in_an_actor(system: System) -> dict[str, bool]:
    """Which patches (by name) an actor process of ``system`` runs (asked of a fresh one)."""
    probe = system.thespian.createActor(PatchProbe)
    try:
        pid, patched = system.thespian.ask(probe, "which", 10)
    finally:
        system.thespian.tell(probe, ActorExitRequest())
    assert pid != os.getpid(), "the probe ran in the caller's process"
    return dict(patched)
