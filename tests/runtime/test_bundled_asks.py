"""A caller's asks of one agent, sent together as one ``Bundle`` by the
caller's receiver (:func:`hayata_py._receiver.bundles`): a real agent handles
each as if it had come alone."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py import _receiver
from hayata_py._actor_messages import Bundle
from hayata_py.messages import Run

pytestmark = pytest.mark.timeout(120)


def _agent(agents: hy.AgentSystem, agent_id: str, **options: Any) -> hy.AgentRef:
    return agents.start_agent(hy.AgentConfig(
        agent_id, {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted", **options))


def _steps(value: str) -> dict[str, Any]:
    return {"steps": [["next", "w", {}], ["finish", value]]}


def test_an_agent_handles_each_message_of_a_bundle_and_drops_only_a_malformed_one(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    agent = _agent(agents, "bundled", max_invocations=4)
    first, second, never = uuid.uuid4().hex, uuid.uuid4().hex, uuid.uuid4().hex
    malformed = Run(_steps("never"), stream="yes", invocation_id=never)  # type: ignore[arg-type]
    agents._system.tell(agent._current_address(), Bundle((
        Run(_steps("one"), invocation_id=first), malformed,
        Run(_steps("two"), invocation_id=second))))
    assert agent.wait(first, 30).result == "one"
    assert agent.wait(second, 30).result == "two"
    dropped = [json.loads(line) for line in
               (tmp_path / "data" / "hayata.log.jsonl").read_text().splitlines()
               if '"bad_message"' in line]
    assert [(d["message"], d["field"]) for d in dropped] == [("Run", "stream")]
    with pytest.raises(hy.HayataError) as unknown:  # the malformed run was never made
        agent.wait(never, 10)
    assert unknown.value.code == "not_found"


def test_asks_made_together_go_as_one_bundle_and_each_gets_its_own_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ainvoke`` of many invocations at once (the asyncio API asks through
    the receiver): the receiver is held in its first send until every other
    ask waits in its outbox; they then go as one bundle, and each caller gets
    the result of its own invocation."""
    callers = 40
    held = threading.Event()
    sizes: list[int] = []
    grouped = _receiver.bundles

    def counting(sends: list[Any]) -> list[Any]:
        if sends and not sizes:
            sizes.append(len(sends))
            assert held.wait(30)
        out = grouped(sends)
        sizes.extend(len(m.messages) for _, m, _ in out if isinstance(m, Bundle))
        return out

    async def main() -> list[Any]:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(hy.AgentConfig(
                "crowd", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted",
                max_invocations=callers))
            await agent.invoke(_steps("warm"))  # the receiver and the edge up
            _, receiver = system.sync._caller_inbox()
            monkeypatch.setattr(_receiver, "bundles", counting)
            calls = asyncio.gather(*(agent.invoke(_steps(f"v{i}"), timeout=60)
                                     for i in range(callers)))
            deadline = time.monotonic() + 30
            try:
                while not (sizes and len(receiver._outbox) + sizes[0] == callers):
                    assert time.monotonic() < deadline, "the asks never all waited"
                    await asyncio.sleep(0.005)
            finally:
                held.set()
            return [result.result for result in await calls]

    results = asyncio.run(asyncio.wait_for(main(), 90))
    assert results == [f"v{i}" for i in range(callers)]
    # the held send and the asks waiting behind it each went as one bundle
    together = [n for n in (sizes[0], callers - sizes[0]) if n > 1]
    assert together and all(n in sizes[1:] for n in together), sizes
