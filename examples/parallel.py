"""Parallel branches, as in Hayata's parallel example.

The policy runs ``customer`` and ``orders`` in parallel with the same input,
then ``aggregate`` with their results (``ctx.parallel_results``, in the
requested order, whichever branch finished first), then finishes.

Run: ``python examples/parallel.py`` from the repository root.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make "examples.parallel" importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hayata_py as hy


def customer(ctx: hy.NodeContext) -> dict[str, Any]:
    time.sleep(0.2)  # the slower branch, requested first
    return {"customer": {"id": ctx.input["customer_id"], "name": "Ada"}}


def orders(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"orders": [{"id": 1, "total": 30}, {"id": 2, "total": 12}]}


def aggregate(ctx: hy.NodeContext) -> dict[str, Any]:
    customer_part, orders_part = ctx.input
    total = sum(o["total"] for o in orders_part["orders"])
    return {"summary": f"{customer_part['customer']['name']} spent {total}"}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next(["customer", "orders"], ctx.input)
    if ctx.step == 1:
        assert ctx.parallel_results is not None
        return hy.Next("aggregate", ctx.parallel_results)
    return hy.Finish(ctx.state["summary"])


def config() -> hy.AgentConfig:
    return hy.AgentConfig(
        id="parallel",
        nodes={name: f"examples.parallel:{name}" for name in ("customer", "orders", "aggregate")},
        decision_policy="examples.parallel:policy",
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as data_dir, hy.AgentSystem(data_dir) as system:
        agent = system.start_agent(config())
        invocation = agent.run({"customer_id": 42}, subscriber=hy.CALLER, stream=True)
        for message in agent.messages(invocation, timeout=30):
            if isinstance(message, hy.AgentEvent):
                print(f"event {message.sequence}: {message.type} {message.data}")
            else:
                print(f"result: ok={message.ok} result={message.result} error={message.error}")
                return 0 if message.ok else 1
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
