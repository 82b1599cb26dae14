"""Worker classes for ``examples/supervision_demo.py``.

They live in their own importable module because each actor process imports
its class by dotted path (``examples.demo_actors.Worker``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from supervisors import SupervisedActor


@dataclass(frozen=True)
class Work:
    """Ask a worker to do something: it answers ``(name, pid, text.upper())``."""

    text: str


@dataclass(frozen=True)
class Crash:
    """Make the worker's handler raise (a bug): its supervisor restarts it."""

    reason: str


class Worker(SupervisedActor):
    """A supervised worker named by its start argument."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        self.name: str = args[0]

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, Work):
            self.send(sender, (self.name, os.getpid(), message.text.upper()))
        elif isinstance(message, Crash):
            raise RuntimeError(message.reason)
