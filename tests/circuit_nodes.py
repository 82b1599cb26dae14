"""Nodes and policy of the circuit breaker tests: ``llm`` stands for a model
endpoint that is down while the file ``input["outage"]`` exists.

Every run appends ``llm <attempt> <pid>`` to ``input["effects"]``, so a test
counts what really ran (a task refused by an open circuit appends nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hayata_py as hy
from examples.drills.effects import append_effect
from tests.hitl_nodes import Transient


def llm(ctx: hy.NodeContext) -> dict[str, Any]:
    append_effect(ctx, ctx.node_id, ctx.attempt)
    if Path(ctx.input["outage"]).exists():
        raise Transient(f"{ctx.node_id} is down (attempt {ctx.attempt})")
    return {"answer": f"ok-{ctx.attempt}"}


def once(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """Call ``llm`` once, then finish with the state."""
    if ctx.step == 0:
        return hy.Next("llm", ctx.input)
    return hy.Finish(dict(ctx.state))


def mapped(ctx: hy.PolicyContext) -> hy.Map | hy.Finish:
    """Call ``llm`` once per item of ``input["items"]`` (a map step), then finish."""
    if ctx.step == 0:
        return hy.Map("llm", ctx.input["items"])
    return hy.Finish({"results": ctx.parallel_results})


breaker = hy.AgentConfig(
    id="breaker", nodes={"llm": llm}, decision_policy=once,
    circuit={"llm": hy.CircuitBreaker(failures=1, window=60, cool_down=600)})
"""For ``hayata agent start tests.circuit_nodes:breaker``: one failure opens it."""
