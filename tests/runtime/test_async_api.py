"""The asyncio API on real processes: same answers as the blocking API, an
event loop that keeps ticking, a bounded number of threads, and cancellation
that detaches the caller without touching the invocation."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import hayata_py as hy
from hayata_py._async import POOL_THREADS
from tests.helpers import assert_logged, find

T = TypeVar("T")


def run_async(main: Callable[[], Awaitable[T]], timeout: float = 90.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), timeout)

    return asyncio.run(bounded())


def worker_config(agent_id: str, **extra: Any) -> hy.AgentConfig:
    return hy.AgentConfig(agent_id, {"w": "tests.graph_nodes:worker",
                                     "g": "tests.graph_nodes:touch_and_wait"},
                          "tests.graph_nodes:scripted", **extra)


async def collect(agent: hy.AsyncAgentRef, inv: str
                  ) -> tuple[list[hy.AgentEvent], hy.AgentResult]:
    events: list[hy.AgentEvent] = []
    async for message in agent.messages(inv, timeout=30):
        if isinstance(message, hy.AgentResult):
            return events, message
        events.append(message)
    raise AssertionError("messages() ended without a result")


async def eventually_async(probe: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


def test_the_async_api_answers_like_the_blocking_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(worker_config("a"))
            assert await system.agents() == ["a"]
            inv = await agent.run({"steps": [["next", "w", {"partials": 2}], ["finish", 7]]},
                                  subscriber=hy.CALLER, stream=True)
            events, result = await collect(agent, inv)
            assert result.ok and result.result == 7
            assert [e.sequence for e in events] == list(range(1, 7))
            assert [e.type for e in events] == [
                "invocation_started", "node_started", "node_partial_result",
                "node_partial_result", "node_completed", "invocation_completed"]
            assert await agent.wait(inv, 30) == result
            assert await agent.get_result(inv) == result
            assert agent.sync.get_result(inv) == result  # the blocking handle agrees
            assert await agent.status() == "idle"
            plain = await agent.run({"steps": [["finish", "plain"]]})
            assert (await agent.wait(plain, 30)).result == "plain"
            with pytest.raises(hy.HayataError) as unknown:
                await agent.wait("no-such-invocation", 30)
            assert unknown.value.code == "not_found"
            with pytest.raises(hy.AgentAlreadyStarted):
                await system.start_agent(worker_config("a"))
            await system.stop_agent("a")
            assert await system.agents() == []

    run_async(main)


def test_bad_input_to_async_calls_gets_the_blocking_api_errors(tmp_path: Path) -> None:
    with pytest.raises(hy.ConfigError) as base:
        hy.AsyncAgentSystem(tmp_path / "data", base="simpleSystemBase")
    assert base.value.details["field"] == "base"
    with pytest.raises(hy.ConfigError) as port:
        hy.AsyncAgentSystem(tmp_path / "data", admin_port=70000)
    assert port.value.details["field"] == "admin_port"
    with pytest.raises(TypeError):
        hy.AsyncAgentSystem(tmp_path / "data", no_such_option=1)

    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(worker_config("b"))
            for options, field in (({"stream": "yes", "subscriber": hy.CALLER}, "stream"),
                                   ({"stream": True}, "subscriber"),
                                   ({"subscriber": "me"}, "subscriber")):
                with pytest.raises(hy.RunRejected) as blocking:
                    agent.sync.run(None, **options)
                with pytest.raises(hy.RunRejected) as awaited:
                    await agent.run(None, **options)
                assert awaited.value.code == blocking.value.code == "invalid_option"
                assert awaited.value.details["field"] == field
                assert str(awaited.value) == str(blocking.value)
            with pytest.raises(hy.RunRejected) as unencodable:
                await agent.run({"when": object()})
            assert unencodable.value.code == "invalid_input"
            with pytest.raises(hy.ConfigError) as timeout:
                await agent.wait("x", timeout=-1)
            assert timeout.value.details["field"] == "timeout"
            with pytest.raises(hy.ConfigError):
                await anext(agent.messages("x", timeout="soon"))  # type: ignore[arg-type]
            with pytest.raises(hy.AgentNotFound):
                await system.agent("nobody")
            gate = tmp_path / "gate"
            busy = await agent.run({"steps": [["next", "g", {
                "pid_file": str(tmp_path / "pid"), "gate": str(gate)}], ["finish", 1]]})
            with pytest.raises(hy.RunRejected) as rejected:
                await agent.run({"steps": [["finish", 2]]})
            assert rejected.value.code == "agent_busy"
            assert rejected.value.details["invocation_id"] == busy
            with pytest.raises(TimeoutError) as blocking_wait:
                agent.sync.wait(busy, 0.2)
            with pytest.raises(TimeoutError) as awaited_wait:
                await agent.wait(busy, 0.2)  # the gated run is still running
            for out_of_time in (blocking_wait.value, awaited_wait.value):
                assert isinstance(out_of_time, hy.HayataError)
                assert out_of_time.code == "timeout"
                assert out_of_time.details["invocation_id"] == busy
            assert str(awaited_wait.value) == str(blocking_wait.value)
            gate.touch()
            assert (await agent.wait(busy, 30)).ok
            assert await agent.status() == "idle"  # nothing of the bad calls ran

    run_async(main)


def test_fifty_invocations_on_ten_agents_from_one_loop_never_block_it(tmp_path: Path) -> None:
    """Issue 14: 50 invocations (5 per agent; an agent runs one at a time) from
    one loop while a heartbeat on the same loop ticks every 10 ms: no gap over
    100 ms, and no thread per call."""
    baseline = threading.active_count()

    async def main() -> tuple[float, int, list[Any]]:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agents = await asyncio.gather(*(
                system.start_agent(hy.AgentConfig(f"x{i}", {"w": "tests.graph_nodes:worker"},
                                                  "tests.graph_nodes:scripted"))
                for i in range(10)))
            locks = [asyncio.Lock() for _ in agents]
            stop = asyncio.Event()
            gaps: list[float] = []
            threads: list[int] = []

            async def heartbeat() -> None:
                loop = asyncio.get_running_loop()
                last = loop.time()
                while not stop.is_set():
                    await asyncio.sleep(0.01)
                    now = loop.time()
                    gaps.append(now - last)
                    threads.append(threading.active_count())
                    last = now

            async def one(n: int) -> Any:
                agent = agents[n % 10]
                async with locks[n % 10]:
                    node = {"partials": 1} if n % 2 else {}  # partials need a stream
                    steps = {"steps": [["next", "w", node], ["finish", n]]}
                    if n % 2:
                        inv = await agent.run(steps, subscriber=hy.CALLER, stream=True)
                        events, result = await collect(agent, inv)
                        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
                    else:
                        inv = await agent.run(steps)
                        result = await agent.wait(inv, 60)
                    return result.result

            beat = asyncio.create_task(heartbeat())
            results = await asyncio.gather(*(one(n) for n in range(50)))
            stop.set()
            await beat
            return max(gaps), max(threads), results

    worst_gap, most_threads, results = run_async(main, timeout=120)
    print(f"heartbeat: worst gap {worst_gap * 1000:.1f} ms; threads {baseline} -> "
          f"at most {most_threads}")
    assert results == list(range(50))
    assert most_threads <= baseline + POOL_THREADS + 1, "a thread per call"
    assert worst_gap < 0.1, f"the event loop stalled for {worst_gap * 1000:.0f} ms"


def test_cancelling_awaits_detaches_and_never_cancels_the_invocation(tmp_path: Path) -> None:
    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(worker_config("c"))
            gate, pid_file = tmp_path / "gate", tmp_path / "pid"
            inv = await agent.run({"steps": [["next", "w", {}], ["next", "g", {
                "pid_file": str(pid_file), "gate": str(gate)}], ["finish", "kept"]]},
                subscriber=hy.CALLER, stream=True)
            stream = agent.messages(inv, timeout=30)
            first = [await anext(stream) for _ in range(4)]  # up to node_started of g
            assert isinstance(first[-1], hy.AgentEvent) and first[-1].data["node_id"] == "g"
            await eventually_async(pid_file.exists)
            reading = asyncio.create_task(anext(stream))
            waiting = asyncio.create_task(agent.wait(inv, 30))
            for _ in range(3):  # let both tasks run up to their first suspension
                await asyncio.sleep(0)
            assert not reading.done() and not waiting.done()  # blocked on the running node
            reading.cancel()
            waiting.cancel()
            for task in (reading, waiting):
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert await agent.status() == "running"
            gate.touch()
            events, result = await collect(agent, inv)  # continues where it stopped
            assert result.ok and result.result == "kept"
            seen = [m for m in first if isinstance(m, hy.AgentEvent)] + events
            assert [e.sequence for e in seen] == list(range(1, len(seen) + 1))
            assert (await agent.wait(inv, 30)) == result

    run_async(main)


def test_async_wait_notices_the_agent_died_and_recover_streams(tmp_path: Path) -> None:
    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(worker_config("d", idempotent_nodes=frozenset({"g"})))
            gate, pid_file = tmp_path / "gate", tmp_path / "pid"
            inv = await agent.run({"steps": [["next", "g", {
                "pid_file": str(pid_file), "gate": str(gate)}], ["finish", "back"]]})
            await eventually_async(pid_file.exists)
            waiting = asyncio.create_task(agent.wait(inv, 60))
            row = find(await system.tree(), "agent")
            assert row is not None
            os.kill(row["pid"], signal.SIGKILL)
            with pytest.raises(hy.HayataError) as lost:
                await waiting
            assert lost.value.code == "recovery_required"
            gate.touch()
            assert await agent.recover(subscriber=hy.CALLER, stream=True) == inv
            events, result = await collect(agent, inv)
            assert result.ok and result.result == "back"
            assert events[0].data["recovered"] is True
            # Numbered on from what the first run had logged before the kill (its
            # events wait up to 10 ms for their write: zero, one or two of them).
            assert_logged(system.sync.store, inv, events)

    run_async(main)
