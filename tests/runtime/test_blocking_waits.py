"""How a blocking ``invoke``/``wait`` waits (:func:`hayata_py._ref_wait.blocking_wait`):
a lone caller, and the first few of many waiting at once, on their threads'
own endpoints, the others through the system's receiver, each caller with
its own result."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py import _ref_wait
from tests import service_nodes
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)


def test_a_lone_invoke_and_wait_do_not_start_the_receiver(tmp_path: Path) -> None:
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(service_nodes.config())
        assert agent.invoke({"tag": "a", "steps": ["echo"]}, timeout=30).result == {"echo": "a"}
        invocation = agent.run({"tag": "b", "steps": ["echo"]})
        assert agent.wait(invocation, 30).result == {"echo": "b"}
        assert system._receiver is None


def test_waits_beyond_the_first_few_go_through_the_receiver_and_get_their_own_results(
        agents: hy.AgentSystem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The invocations wait at a closed gate until every thread waits, so
    exactly the first ``OWN_ENDPOINT_WAITS`` to ask found fewer than that
    under way."""
    own = _ref_wait.OWN_ENDPOINT_WAITS
    callers = own + 8
    agent = agents.start_agent(service_nodes.config(
        max_invocations=callers, edge_concurrency={"agated": callers},
        node_concurrency={"agated": 1}))
    agent.invoke({"tag": "warm", "steps": ["echo"]}, timeout=30)
    ways: list[str] = []
    lock = threading.Lock()

    def counted(name: str) -> Any:
        original = getattr(_ref_wait, name)

        def way(*args: Any) -> Any:
            with lock:
                ways.append(name)
            return original(*args)
        return way

    monkeypatch.setattr(_ref_wait, "wait", counted("wait"))
    monkeypatch.setattr(_ref_wait, "received", counted("received"))
    gate = tmp_path / "gate"
    results: dict[int, Any] = {}

    def call(i: int) -> None:
        if i % 2:
            results[i] = agent.invoke({"tag": i, "steps": ["agated"], "gate": str(gate)},
                                      timeout=60)
        else:
            invocation = agent.run({"tag": i, "steps": ["agated"], "gate": str(gate)})
            results[i] = agent.wait(invocation, 60)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    try:
        eventually(lambda: len(ways) == callers, timeout=30, message="every caller waits")
    finally:
        gate.touch()
        for thread in threads:
            thread.join(60)
    assert sorted(ways) == ["received"] * (callers - own) + ["wait"] * own
    assert {i: r.result for i, r in results.items()} == {
        i: {"agated": i, "attempt": 1} for i in range(callers)}


def test_a_hundred_threads_polling_with_short_waits_all_get_their_results(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """Each thread polls its held-open run with ``wait(timeout=0.5)``; every
    timed-out wait leaves a waiter the agent answers once the run ends (to a
    closed endpoint or to the receiver). Each thread still gets its own
    result once the runs end."""
    callers = 100
    agent = agents.start_agent(service_nodes.config(
        max_invocations=callers, edge_concurrency={"agated": callers},
        node_concurrency={"agated": 1}))
    gate = tmp_path / "gate"
    runs = [agent.run({"tag": i, "steps": ["agated"], "gate": str(gate)})
            for i in range(callers)]
    polls = [0] * callers
    results: dict[int, Any] = {}

    def poll(i: int) -> None:
        while True:
            try:
                results[i] = agent.wait(runs[i], timeout=0.5)
                return
            except TimeoutError:
                polls[i] += 1

    threads = [threading.Thread(target=poll, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    try:
        eventually(lambda: min(polls) >= 2, timeout=60, message="every thread polled twice")
    finally:
        gate.touch()
    opened = time.monotonic()
    for thread in threads:
        thread.join(max(0.0, opened + 30 - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "results still missing 30 s on"
    assert {i: r.result for i, r in results.items()} == {
        i: {"agated": i, "attempt": 1} for i in range(callers)}
