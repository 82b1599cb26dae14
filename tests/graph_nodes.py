"""Node functions and policies used by the agent tests (module level: importable).

``scripted`` is a policy driven by the invocation input: ``{"steps": [...]}``
where each step is ``["next", node_or_nodes, input]``, ``["finish", value]``,
``["finish_ctx"]`` (finish with the whole context as data), ``["raise", msg]``
or ``["garbage"]``. ``worker`` is a node driven by its input dict (see its
docstring), so one function can play every role.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import hayata_py as hy


def mock_node(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"answer": f"echo:{ctx.input}", "seen_state": dict(ctx.state)}


def once_policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next("mock", ctx.input)
    return hy.Finish(ctx.last_result)


def seq3_policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """n1, n2, n3 in turn, then finish with the state."""
    if ctx.step < 3:
        return hy.Next(f"n{ctx.step + 1}", ctx.input)
    return hy.Finish(dict(ctx.state))


def trivial(ctx: hy.NodeContext) -> dict[str, Any]:
    return {ctx.node_id: "done"}


def _context(ctx: hy.PolicyContext) -> dict[str, Any]:
    return {"step": ctx.step, "state": dict(ctx.state), "last_result": ctx.last_result,
            "parallel_results": ctx.parallel_results, "invocation_id": ctx.invocation_id}


def scripted(ctx: hy.PolicyContext) -> Any:
    steps = ctx.input["steps"]
    history = list(ctx.state.get("history", []))
    if ctx.step >= len(steps):
        return hy.Next("worker", {})  # keeps going (for max_steps)
    step = steps[ctx.step]
    kind = step[0]
    if kind == "next":
        node = step[1] if isinstance(step[1], str) else list(step[1])
        payload = step[2]
        if payload == "$context":
            payload = {"context": _context(ctx), "history": history}
        return hy.Next(node, payload)
    if kind == "finish":
        return hy.Finish(step[1])
    if kind == "finish_ctx":
        return hy.Finish(_context(ctx))
    if kind == "raise":
        raise ValueError(step[1])
    if kind == "stall":  # the agent's process itself busy: touch step[1], sleep step[2]
        with open(step[1], "w"):
            pass
        time.sleep(step[2])
        return hy.Finish("stalled")
    return {"not": "a decision"}


def worker(ctx: hy.NodeContext) -> Any:
    """Input keys (all optional): ``log`` (append "<node> <event> <pid> <time>"
    lines), ``sleep`` (seconds), ``partials`` (stream this many partials),
    ``raise`` (message), ``return`` (return this instead of a dict),
    ``result`` (dict to return), ``exit`` (os._exit the edge process)."""
    spec = ctx.input if isinstance(ctx.input, dict) else {}
    per_node = spec.get("per_node", {}).get(ctx.node_id, {})
    spec = {**spec, **per_node}
    log = spec.get("log")

    def note(event: str) -> None:
        if log:
            with open(log, "a") as f:
                f.write(f"{ctx.node_id} {event} {os.getpid()} {time.time():.6f}\n")

    note("start")
    for i in range(spec.get("partials", 0)):
        assert ctx.streamer is not None
        ctx.streamer({"i": i, "node": ctx.node_id})
    if "sleep" in spec:
        time.sleep(spec["sleep"])
    if spec.get("exit"):
        os._exit(3)
    if "raise" in spec:
        note("raise")
        raise RuntimeError(spec["raise"])
    note("end")
    if "return" in spec:
        return spec["return"]
    return {ctx.node_id: spec.get("result", "done"), "context": {
        "node_id": ctx.node_id, "task_id": ctx.task_id, "execution_id": ctx.execution_id,
        "invocation_id": ctx.invocation_id, "state": dict(ctx.state), "input_keys": sorted(
            k for k in spec if k != "per_node")}}


def partial_probe(ctx: hy.NodeContext) -> dict[str, Any]:
    """Streams; checks that a non-dict partial is refused; keeps its streamer
    and, on its next execution, checks the old one is refused as stale."""
    global _KEPT
    outcome: dict[str, Any] = {}
    assert ctx.streamer is not None
    if _KEPT is not None:
        try:
            _KEPT({"from": "stale"})
            outcome["stale"] = "published"
        except hy.StaleExecution:
            outcome["stale"] = "refused"
    ctx.streamer({"n": 1})
    try:
        ctx.streamer(["not", "a", "dict"])  # type: ignore[arg-type]
        outcome["non_dict"] = "accepted"
    except hy.InvalidPartialResult:
        outcome["non_dict"] = "refused"
    ctx.streamer({"n": 2})
    _KEPT = ctx.streamer
    return outcome


_KEPT: Any = None


def counted_raise(ctx: hy.NodeContext) -> dict[str, Any]:
    with open(ctx.input["count_file"], "a") as f:
        f.write(f"{ctx.task_id}\n")
    raise RuntimeError("counted once")


def touch_and_wait(ctx: hy.NodeContext) -> dict[str, Any]:
    """Writes its pid to ``ctx.input['pid_file']``, then works for
    ``ctx.input['sleep']`` seconds, or until the file ``ctx.input['gate']``
    exists if one is named (the test decides when the work ends)."""
    Path(ctx.input["pid_file"]).write_text(str(os.getpid()))
    end = time.monotonic() + ctx.input.get("sleep", 30)
    gate = ctx.input.get("gate")
    while time.monotonic() < end and not (gate and Path(gate).exists()):
        time.sleep(0.005)  # the node's work
    return {"slept": True}
