"""``AgentRef.invoke``: a run and its wait in one message (``Run(wait=True)``).
The agent answers with the result only; refusals, restarts, threads and the
asyncio API behave as ``wait(run(...))`` does. The check of a waiting run's
options: ``tests/unit/test_invoke_options.py``."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.messages import ResultReply, Run, RunAccepted
from hayata_py.store import TaskClass
from tests.helpers import eventually, find, in_thread

pytestmark = pytest.mark.timeout(120)

STEPS = {"steps": [["next", "w", {"result": {"n": 1}}], ["finish", "done"]]}


def config(agent_id: str, **extra: Any) -> hy.AgentConfig:
    return hy.AgentConfig(agent_id, {"w": "tests.graph_nodes:worker"},
                          "tests.graph_nodes:scripted", **extra)


def test_invoke_returns_the_result_of_a_recorded_invocation(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(config("inv"))
    result = agent.invoke(STEPS, timeout=30)
    assert result.ok and result.result == "done"
    assert len(result.invocation_id) == 32
    assert agent.get_result(result.invocation_id) == result
    tasks = agent.tasks(result.invocation_id)
    assert [(t.node_id, c) for t, c in tasks] == [("w", TaskClass.COMPLETED)]


def test_the_agent_answers_a_waiting_run_with_the_result_only(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(config("raw"))
    endpoint, address = agents._system, agent._current_address()
    invocation_id = uuid.uuid4().hex
    endpoint.tell(address, Run(STEPS, wait=True, invocation_id=invocation_id, ref=77))
    answers = []
    while not answers or not isinstance(answers[-1], ResultReply):
        answer = endpoint.listen(10)
        assert answer is not None, f"no answer after {answers}"
        answers.append(answer)
    assert not [a for a in answers if isinstance(a, RunAccepted)], answers
    last = answers[-1]
    assert (last.ref, last.invocation_id) == (77, invocation_id)
    assert last.result is not None and last.result.result == "done"


def test_a_chosen_id_is_accepted_and_a_taken_one_refused(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(config("ids", max_invocations=4))
    endpoint, address = agents._system, agent._current_address()
    chosen = uuid.uuid4().hex
    slow = {"steps": [["next", "w", {"sleep": 1.0}], ["finish", "slow"]]}
    accepted = endpoint.ask(address, Run(slow, invocation_id=chosen, ref=5), 10)
    assert isinstance(accepted, RunAccepted) and accepted.invocation_id == chosen
    while_running = endpoint.ask(address, Run(STEPS, invocation_id=chosen, ref=6), 10)
    assert isinstance(while_running, hy.RunRejected)
    assert (while_running.code, while_running.ref) == ("invocation_exists", 6)
    assert agent.wait(chosen, timeout=30).result == "slow"
    after = endpoint.ask(address, Run(STEPS, invocation_id=chosen, ref=8), 10)
    assert isinstance(after, hy.RunRejected) and after.code == "invocation_exists", after
    assert agent.get_result(chosen).result == "slow"  # the first one's, untouched


def test_invoke_on_a_busy_agent_raises_run_rejected(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(config("busy"))
    first = agent.run({"steps": [["next", "w", {"sleep": 1.0}], ["finish", 1]]})
    with pytest.raises(hy.RunRejected) as refused:
        agent.invoke(STEPS, timeout=30)
    assert refused.value.code == "agent_busy"
    assert agent.wait(first, timeout=30).result == 1


def test_an_enqueued_invoke_waits_for_its_own_turn(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(config("queue", max_invocations=4))
    first = agent.run({"steps": [["next", "w", {"sleep": 0.5}], ["finish", "first"]]},
                      thread="t1")
    second = agent.invoke({"steps": [["finish", "second"]]}, thread="t1",
                          multitask="enqueue", timeout=30)
    assert second.result == "second"
    assert agent.get_result(first).result == "first"  # it ended before the queued one ran


def test_invoke_whose_agent_dies_says_recovery_required_naming_the_invocation(
        agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(config("mortal", execution_timeout=60.0))
    waited = in_thread(lambda: agent.invoke({"steps": [["next", "w", {"sleep": 60}]]},
                                            timeout=60))
    eventually(lambda: agent.status() == "running", message="invocation running")
    before = find(agents.tree(), "agent")
    assert before is not None
    os.kill(before["pid"], signal.SIGKILL)
    error = waited.exception(timeout=30)
    assert isinstance(error, hy.HayataError) and error.code == "recovery_required", error
    invocation_id = error.details["invocation_id"]
    assert [u.invocation_id for u in agent.unfinished()] == [invocation_id]
    # asked about that one only: the same answer; about another id: none
    assert agent.unfinished(invocation_id) == agent.unfinished()
    assert agent.unfinished(uuid.uuid4().hex) == []


def test_invoke_whose_agent_died_before_recording_it_says_run_lost(
        agents: hy.AgentSystem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's own process is busy (its policy sleeps), so the invoke's Run
    waits unread in its socket; the agent is killed: its successor has no such
    invocation."""
    import threading

    import thespian.system.transport.TCPTransport as tcp

    agent = agents.start_agent(config("lost"))
    marker = tmp_path / "stalling"
    agent.run({"steps": [["stall", str(marker), 60]]})
    eventually(marker.exists, message="the policy stalls the agent")
    sent = threading.Event()
    whole = tcp.TCPTransport._next_XMIT_3  # this process's transport: the frame is out

    def frame_sent(self: Any, intent: Any) -> Any:
        if isinstance(intent.message, Run) and intent.message.wait:
            sent.set()
        return whole(self, intent)

    monkeypatch.setattr(tcp.TCPTransport, "_next_XMIT_3", frame_sent)
    waited = in_thread(lambda: agent.invoke(STEPS, timeout=60))
    assert sent.wait(30), "the invoke's Run was never written to the agent's socket"
    before = find(agents.tree(), "agent")
    assert before is not None
    os.kill(before["pid"], signal.SIGKILL)
    error = waited.exception(timeout=45)
    assert isinstance(error, hy.RunRejected) and error.code == "run_lost", error
    with pytest.raises(hy.HayataError) as unknown:
        agent.get_result(error.details["invocation_id"])
    assert unknown.value.code == "not_found"


def test_the_async_invoke_returns_and_refuses_as_the_blocking_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(config("aio"))
            result = await agent.invoke(STEPS, timeout=30)
            assert result.ok and result.result == "done"
            assert await agent.get_result(result.invocation_id) == result
            first = await agent.run({"steps": [["next", "w", {"sleep": 1.0}], ["finish", 1]]})
            with pytest.raises(hy.RunRejected) as refused:
                await agent.invoke(STEPS, timeout=30)
            assert refused.value.code == "agent_busy"
            assert (await agent.wait(first, timeout=30)).result == 1

    asyncio.run(asyncio.wait_for(main(), 90))


@pytest.mark.postgres
def test_invoke_on_postgres_records_the_invocation_and_refuses_its_id_again(
        tmp_path: Path, pg_url: str) -> None:
    from hayata_py.store import open_store

    with hy.AgentSystem(tmp_path / "data", store_url=pg_url) as system:
        agent = system.start_agent(config(f"pg-inv-{uuid.uuid4().hex[:8]}"))
        result = agent.invoke(STEPS, timeout=60)
        assert result.ok and result.result == "done"
        store = open_store(pg_url)
        try:
            record = store.get_invocation(result.invocation_id)
            assert record is not None and record.status == "completed"
        finally:
            store.close()
        again = system._system.ask(agent._current_address(), Run(
            STEPS, invocation_id=result.invocation_id, wait=True, ref=9), 10)
        assert isinstance(again, hy.RunRejected) and again.code == "invocation_exists", again
