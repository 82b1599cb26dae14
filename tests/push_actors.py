"""Actors of the ``send_now`` tests (``tests/supervisors/test_send_now.py``;
importable by the actor processes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from supervisors import SupervisedActor

WAIT = 10.0
"""Seconds an actor here waits for a file before it gives up."""


def _wait_for(path: Path) -> bool:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


class Pusher(SupervisedActor):
    """``("push", folder, count)``: in one handler, sends the sender ``("part", i)``
    for i = 1..count with ``send_now``, after each waiting for ``folder/seen-<i>``;
    then ``("done", what each send_now returned, the gate not opened or None)``.
    ``("to", target, seconds, payload)``: ``send_now`` it, answer ``("sent",
    returned, seconds taken)``. ``("note", text)``: kept; ``("order",)``: the
    handled messages, in the order their handlers ended."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        self.handled: list[str] = []

    def on_receive(self, message: Any, sender: Any) -> None:
        if not hasattr(self, "handled"):
            self.handled = []
        kind = message[0]
        if kind == "push":
            folder, count = Path(message[1]), message[2]
            sent: list[bool] = []
            late = None
            for i in range(1, count + 1):
                sent.append(self.send_now(sender, ("part", i), 5.0))
                if not _wait_for(folder / f"seen-{i}"):
                    late = i
                    break
            self.send(sender, ("done", sent, late))
        elif kind == "to":
            start = time.monotonic()
            returned = self.send_now(message[1], message[3], message[2])
            self.send(sender, ("sent", returned, time.monotonic() - start))
        elif kind == "order":
            self.send(sender, ("order", list(self.handled)))
            return
        self.handled.append(message[1] if kind == "note" else kind)


class Holder(SupervisedActor):
    """``("hold", folder)``: writes ``folder/holding``, then blocks its loop until
    ``folder/release`` exists. ``("got",)``: every other message so far."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if not hasattr(self, "got"):
            self.got: list[Any] = []
        if isinstance(message, tuple) and message[:1] == ("hold",):
            (Path(message[1]) / "holding").touch()
            _wait_for(Path(message[1]) / "release")
        elif message == ("got",):
            self.send(sender, list(self.got))
        else:
            self.got.append(message)
