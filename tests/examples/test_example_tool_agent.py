"""examples/tool_agent.py: the LLM tool-calling loop runs offline, retries its
rate-limited search, pauses for approval before the side-effecting tool."""

from __future__ import annotations

import json
from pathlib import Path

import hayata_py as hy
from examples.tool_agent import config


def test_the_tool_loop_pauses_for_approval_then_sends_once(agents: hy.AgentSystem,
                                                           tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.jsonl"
    agent = agents.start_agent(config())
    inv = agent.run({"question": "When is the launch?", "outbox": str(outbox)},
                    subscriber=hy.CALLER, stream=True)
    messages = list(agent.messages(inv, timeout=60))
    paused = messages[-1]
    assert isinstance(paused, hy.AgentResult) and paused.status == "paused", paused
    assert paused.error is not None
    call = paused.error.details["payload"]["approve_tool_call"]
    assert call["name"] == "send_email" and "12 May" in call["args"]["body"]
    assert not outbox.exists(), "nothing is sent before the approval"
    types = [m.type for m in messages if isinstance(m, hy.AgentEvent)]
    assert types.count("node_retrying") == 1 and "node_partial_result" in types
    search = [t for t, _ in agent.tasks(inv) if t.node_id == "search"]
    assert [(t.status, t.attempt) for t in search] == [("completed", 2)]

    agent.resume(inv, {"approve": True})
    result = agent.wait(inv, 60)
    assert result.ok and result.result["answer"] == "I emailed the team the launch date."
    sent = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert len(sent) == 1 and sent[0]["to"] == "team@example.com"


def test_a_refused_call_is_not_made(agents: hy.AgentSystem, tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.jsonl"
    agent = agents.start_agent(config())
    inv = agent.run({"question": "When is the launch?", "outbox": str(outbox)})
    assert agent.wait(inv, 60).status == "paused"
    agent.resume(inv, {"approve": False, "why": "not yet"})
    result = agent.wait(inv, 60)
    assert result.ok and result.result["answer"] == "Understood, I did not send the email."
    assert not outbox.exists()
