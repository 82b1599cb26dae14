"""An LLM tool-calling loop, offline: a deterministic fake model, a flaky search
tool with a retry policy, and a person's approval before a side-effecting tool.

The policy routes on the model's answer: a ``tool_call`` runs that tool, a
``final`` answer finishes. ``search`` fails its first attempt with a
transient ``RateLimited`` (retried after a durable backoff). Before
``send_email`` (it writes to an outbox file: a real effect) the policy
pauses with the call as payload; ``resume(inv, {"approve": true})`` sends it,
``{"approve": false}`` tells the model it was refused.

Run it with ``python examples/tool_agent.py`` (answers the approval itself),
or from a shell::

    hayata agent start examples.tool_agent:config
    hayata run tool-agent '{"question": "When is the launch?", "outbox": "/tmp/outbox"}'
    hayata agent list                       # paused, with the call awaiting approval
    hayata resume tool-agent INVOCATION --value '{"approve": true}' --stream
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make "examples.tool_agent" importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hayata_py as hy

TOOLS = ("search", "send_email")


class RateLimited(Exception):
    """What an LLM or search API says when called too often: worth a retry."""


def fake_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A deterministic stand-in for a chat model with tools: reads the transcript."""
    seen = {m.get("tool") for m in messages if m["role"] == "tool"}
    question = messages[0]["content"]
    if "search" not in seen:
        return {"tool_call": {"name": "search", "args": {"query": question}}}
    refused = [m for m in messages if m["role"] == "user" and m.get("refused")]
    if "send_email" not in seen and not refused:
        found = next(m["content"] for m in messages if m.get("tool") == "search")
        return {"tool_call": {"name": "send_email",
                              "args": {"to": "team@example.com", "body": found}}}
    return {"final": "I emailed the team the launch date." if "send_email" in seen
            else "Understood, I did not send the email."}


async def model(ctx: hy.NodeContext) -> dict[str, Any]:
    """The LLM call (``async def``: runs on the edge's event loop), streaming tokens."""
    question = (ctx.input or {}).get("question", "When is the launch?")
    messages = list(ctx.state["messages"]) or [{"role": "user", "content": question}]
    answer = fake_model(messages)
    text = answer.get("final") or f"calling {answer['tool_call']['name']}"
    for token in text.split():
        await asyncio.sleep(0)  # a real client awaits the next chunk here
        if ctx.streamer is not None:
            ctx.streamer({"token": token})
    return {"messages": [*messages, {"role": "assistant", **answer}], "answer": answer}


def search(ctx: hy.NodeContext) -> dict[str, Any]:
    """A read-only tool; its first attempt is rate limited (retried by the policy)."""
    if ctx.attempt == 1:
        raise RateLimited("429 Too Many Requests")
    result = f"The launch of {ctx.input['args']['query']!r} is on 12 May."
    return _tool_result(ctx, "search", result)


def send_email(ctx: hy.NodeContext) -> dict[str, Any]:
    """A side-effecting tool: appends to the outbox (idempotency key included)."""
    with open(ctx.input["outbox"], "a") as f:
        f.write(json.dumps({**ctx.input["args"], "key": ctx.idempotency_key}) + "\n")
    return _tool_result(ctx, "send_email", "sent")


def _tool_result(ctx: hy.NodeContext, tool: str, content: str) -> dict[str, Any]:
    return {"messages": [*ctx.state["messages"], {"role": "tool", "tool": tool,
                                                   "content": content}]}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish | hy.Pause:
    """Model, then whatever it asks for, until it gives a final answer."""
    run_input = ctx.input or {}
    if ctx.step == 0 or ctx.last_result is None or not ctx.last_result.get("answer"):
        return hy.Next("model", run_input)  # the first turn, and after every tool result
    answer = ctx.last_result["answer"]
    if "final" in answer:
        return hy.Finish({"answer": answer["final"], "turns": ctx.step})
    call = answer["tool_call"]
    if call["name"] == "send_email":
        if ctx.resume_value is None:
            return hy.Pause({"approve_tool_call": call})
        if not ctx.resume_value.get("approve"):
            return hy.Next("refused", {"why": ctx.resume_value.get("why", "refused")})
    return hy.Next(call["name"], {**call, "outbox": run_input.get("outbox")})


def refused(ctx: hy.NodeContext) -> dict[str, Any]:
    """Tell the model that the person refused the call."""
    return {"messages": [*ctx.state["messages"], {"role": "user", "refused": True,
                                                   "content": ctx.input["why"]}],
            "answer": None}


def config() -> hy.AgentConfig:
    return hy.AgentConfig(
        id="tool-agent",
        nodes={"model": "examples.tool_agent:model", "search": "examples.tool_agent:search",
               "send_email": "examples.tool_agent:send_email",
               "refused": "examples.tool_agent:refused"},
        decision_policy="examples.tool_agent:policy",
        state={"messages": []},
        max_steps=12,
        node_timeouts={"model": 120, "search": 10},
        retry={"search": hy.RetryPolicy(max_attempts=3, initial_interval=0.2,
                                        retry_on=("examples.tool_agent:RateLimited",))},
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        outbox = str(Path(tmp) / "outbox.jsonl")
        with hy.AgentSystem(Path(tmp) / "data") as system:
            agent = system.start_agent(config())
            inv = agent.run({"question": "When is the launch?", "outbox": outbox},
                            subscriber=hy.CALLER, stream=True)
            for message in agent.messages(inv, timeout=60):
                print(message)
            print("-- approving the email --")
            agent.resume(inv, {"approve": True}, subscriber=hy.CALLER, stream=True)
            for message in agent.messages(inv, timeout=60):
                print(message)
            print("outbox:", Path(outbox).read_text().strip())


if __name__ == "__main__":
    main()
