"""The agent's one routing table (``ROUTES`` in ``hayata_py._actors.agent``),
without a process: each message type reaches the part that owns it."""

from __future__ import annotations

from typing import Any

import pytest
from thespian.actors import WakeupMessage

from hayata_py import _actor_messages as p
from hayata_py._actors.agent import ROUTES, route
from hayata_py._actors.in_flight import Commit
from hayata_py._invocation import DownCause
from hayata_py.messages import (
    Abandon,
    Cancel,
    GetResult,
    GetStatus,
    GetUnfinished,
    Recover,
    ResolveTask,
    ResumePaused,
    Run,
    WaitResult,
)


class Recorder:
    """A part of a fake agent: records each call made to it."""

    def __init__(self, name: str, calls: list[tuple[str, str, tuple[Any, ...]]]) -> None:
        self._name, self._calls = name, calls

    def __getattr__(self, method: str) -> Any:
        return lambda *args: self._calls.append((self._name, method, args))


class FakeAgent:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []
        self.admission = Recorder("admission", self.calls)
        self.nodes = Recorder("nodes", self.calls)
        self.timers = Recorder("timers", self.calls)


@pytest.mark.parametrize(("message", "part", "method", "args"), [
    (Run(1), "admission", "on_run", "message, sender"),
    (Recover(), "admission", "on_recover", "message, sender"),
    (ResumePaused("i" * 32), "admission", "on_recover", "message, sender"),
    (p.EdgeLost("n", "n.edge-1", p.EdgeExit.DIED), "nodes", "on_edge_lost", "message"),
    (p.NodeUp("n", "addr", 1), "nodes", "on_node_up", "message"),
    (p.NodeExited("n", 1, DownCause.CRASHED), "nodes", "on_node_down", "message"),
    (WakeupMessage(1.0, "at"), "timers", "on_timer", "payload"),
])
def test_a_message_reaches_the_part_that_owns_it(message: Any, part: str, method: str,
                                                 args: str) -> None:
    agent = FakeAgent()
    handler = route(type(message))
    assert handler is not None
    handler(agent, message, "sender")
    expected = {"message, sender": (message, "sender"), "message": (message,),
                "payload": ("at",)}[args]
    assert agent.calls == [(part, method, expected)]


def test_every_message_the_agent_handles_has_one_route() -> None:
    handled = {Commit, p.Outcome, p.Outcomes, p.Partial, p.ReducerReady, p.ReducerGone,
               p.ReducerAnswer, p.EdgeTable, p.EdgeLost, Run, WakeupMessage, p.NodeTable,
               p.NodeUp, p.NodeExited, GetStatus, GetUnfinished, Recover, ResumePaused,
               ResolveTask, Abandon, Cancel, GetResult, WaitResult}
    assert set(ROUTES) == handled
    assert all(callable(handler) for handler in ROUTES.values())


def test_a_subclass_takes_its_base_route_and_an_unknown_message_none() -> None:
    class LaterRun(Run):
        pass

    assert route(LaterRun) is ROUTES[Run]
    assert route(p.KillEdge) is None
    assert route(str) is None
