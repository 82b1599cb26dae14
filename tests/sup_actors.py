"""Actor classes used by the supervision tests (importable by the actor processes)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from supervisors import ChildEvent, ChildSpec, SupervisedActor, Supervisor, SupervisorFlags

CLOCK_ENV = "SUPERVISORS_TEST_CLOCK"


class Echo(SupervisedActor):
    """Answers ``("pid",)`` with its pid, ``("raise", text)`` by raising,
    ``("block", seconds)`` by blocking its loop (then answering ``"unblocked"``),
    ``("log", text)`` by logging
    ``text`` as an error through Python's logging (which Thespian forwards to its
    logger process), anything else by echoing."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        log = kwargs.get("start_log")
        if log:
            with open(log, "a") as f:
                f.write(f"start {self.child_id} {os.getpid()}\n")
        self.stop_log = kwargs.get("stop_log")

    def on_receive(self, message: Any, sender: Any) -> None:
        if message == ("pid",):
            self.send(sender, os.getpid())
        elif isinstance(message, tuple) and message[:1] == ("raise",):
            raise RuntimeError(message[1])
        elif isinstance(message, tuple) and message[:1] == ("args",):
            self.send(sender, self.args)
        elif isinstance(message, tuple) and message[:1] == ("block",):
            time.sleep(message[1])
            self.send(sender, "unblocked")
        elif isinstance(message, tuple) and message[:1] == ("log",):
            logging.getLogger("tests.sup_actors").error(message[1])
            self.send(sender, "logged")
        else:
            self.send(sender, message)

    def on_stop(self) -> None:
        if self.stop_log:
            with open(self.stop_log, "a") as f:
                f.write(f"stop {self.child_id} {os.getpid()}\n")


class Stubborn(Echo):
    """Ignores the stop request: its ``on_stop`` blocks far longer than any shutdown time."""

    def on_stop(self) -> None:
        super().on_stop()
        time.sleep(3600)


class FailsToStart(SupervisedActor):
    def on_start(self, *args: Any, **kwargs: Any) -> None:
        raise ValueError("refusing to start")


class FileClock(Supervisor):
    """A supervisor whose intensity clock is a number in the file named by
    ``$SUPERVISORS_TEST_CLOCK`` (tests move time by rewriting the file)."""

    @staticmethod
    def clock() -> float:
        return float(Path(os.environ[CLOCK_ENV]).read_text())


class CountingCrasher(Echo):
    """Appends a line to the file named in the message, then raises."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, tuple) and message[:1] == ("count-and-raise",):
            with open(message[1], "a") as f:
                f.write(f"{os.getpid()}\n")
            raise RuntimeError("counted")
        super().on_receive(message, sender)


class SlowStart(Echo):
    """Its start never answers in time (a system that died during the start)."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(60)


class EventRecorder(Supervisor):
    """A supervisor that appends ``kind child exit`` for each child event to
    the file given as its third start argument."""

    def init(self, *args: Any, **kwargs: Any) -> tuple[SupervisorFlags, list[ChildSpec]]:
        self.event_log = args[2]
        return args[0], list(args[1])

    def on_child_event(self, event: ChildEvent) -> None:
        with open(self.event_log, "a") as f:
            f.write(f"{event.kind} {event.child_id} {event.exit}\n")


class StartsUntilFlagged(Echo):
    """Starts normally until the file ``flag`` exists; from then on its start
    raises (``then="raise"``) or never answers (``then="hang"``). Every start
    attempt appends to ``start_log`` first."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        super().on_start(*args, **kwargs)
        if Path(kwargs["flag"]).exists():
            if kwargs.get("then") == "hang":
                time.sleep(60)
            raise RuntimeError("flagged: refusing to start")


class Collects(Echo):
    """Answers ``("gc",)`` by running a full garbage collection, then its pid
    (the memory measurement of forked children uses it)."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if message == ("gc",):
            import gc

            gc.collect()
            self.send(sender, os.getpid())
            return
        super().on_receive(message, sender)


class Tally(Echo):
    """Keeps every ``("bye", n)`` it gets; answers ``("tally",)`` with their numbers."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, tuple) and message[:1] == ("bye",):
            self.got = [*getattr(self, "got", []), message[1]]
        elif message == ("tally",):
            self.send(sender, list(getattr(self, "got", [])))
        else:
            super().on_receive(message, sender)


class SaysGoodbye(Echo):
    """Told ``("listen", address, count)``, it sends ``("bye", 0..count-1)`` to
    ``address`` as it exits, right after arming a timer that is due at once:
    all of them are still to be sent, and the timer due, when Thespian drains
    its sends before the process ends."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if isinstance(message, tuple) and message[:1] == ("listen",):
            self.listener, self.count = message[1], message[2]
            self.send(sender, "listening")
        else:
            super().on_receive(message, sender)

    def receiveMessage(self, message: Any, sender: Any) -> Any:
        from datetime import timedelta

        from thespian.actors import ActorExitRequest

        if isinstance(message, ActorExitRequest) and hasattr(self, "listener"):
            self.wakeupAfter(timedelta(0))
            for n in range(self.count):
                self.send(self.listener, ("bye", n))
        return super().receiveMessage(message, sender)
