"""The benchmark graphs, built the same way for hayata_py and for LangGraph.

Module level and importable: hayata_py runs node functions in edge processes
and policies in the agent process, by import path (``benchmarks.graphs:...``).

Graphs (node work is shared by both sides):

- ``seq3``: three sequential trivial nodes ``n1 -> n2 -> n3``.
- ``fanout8``: eight trivial branches ``b0..b7`` in parallel, then ``join``.
- ``sleep8``: eight branches ``s0..s7`` in parallel, each sleeping 50 ms.
- ``cpu2``: two CPU-bound branches ``c0, c1`` in parallel (pure Python loop).
- ``map100``: one node over 100 items: hayata_py ``hy.Map`` (one durable task per
  item, ``map_concurrency`` at once, no reduce); LangGraph a ``Send`` fan-out of
  100 to one node (its results summed by a reducer on the state).
- ``finish``: hayata_py only: the policy finishes at once (no node), to split
  the fixed per-invocation cost from the per-step cost.
- ``steps100``: hayata_py only (workload 6, whole-system crash): 100 sequential
  trivial steps, then a ``gate`` node (idempotent) that blocks while a file exists.
- ``service3`` (issue 21, :mod:`benchmarks.bench_service`): ``plan`` (sync,
  trivial) -> ``llm`` (``async def``, awaits ``asyncio.sleep(input["delay"])``,
  an LLM call's wait) -> ``answer`` (sync, trivial); built by
  :func:`hy_service_config` and :func:`lg_service_graph`.

hayata_py expresses a graph as a decision policy; LangGraph as a StateGraph.
Node results: hayata_py merges a sequential node's dict into the state and
hands parallel results to the next decision; LangGraph merges every node's
``{"results": {...}}`` through a dict-merging reducer.
"""

from __future__ import annotations

import asyncio
import operator
import os
import time
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from thespian.actors import Actor

import hayata_py as hy

SEQ_NODES = ("n1", "n2", "n3")
FAN_NODES = tuple(f"b{i}" for i in range(8))
SLEEP_NODES = tuple(f"s{i}" for i in range(8))
CPU_NODES = ("c0", "c1")
SLEEP_S = 0.05
MAP_ITEMS = 100

# -- the work, shared by both sides ------------------------------------------------


def cpu_work(iterations: int) -> int:
    """Pure-Python CPU work (holds the GIL the whole time)."""
    total = 0
    for i in range(iterations):
        total = (total + i * i) % 1_000_003
    return total


def calibrate_cpu(target_s: float = 0.3) -> int:
    """Iterations of :func:`cpu_work` that take about ``target_s`` here."""
    n = 200_000
    while True:
        t0 = time.perf_counter()
        cpu_work(n)
        elapsed = time.perf_counter() - t0
        if elapsed > 0.05:
            return max(1, int(n * target_s / elapsed))
        n *= 4


# -- hayata_py: node functions and policies ---------------------------------------------


def hy_trivial(ctx: hy.NodeContext) -> dict[str, Any]:
    return {ctx.node_id: "done"}


def hy_sleep(ctx: hy.NodeContext) -> dict[str, Any]:
    time.sleep(SLEEP_S)
    return {ctx.node_id: "slept"}


def hy_cpu(ctx: hy.NodeContext) -> dict[str, Any]:
    return {ctx.node_id: cpu_work(int(ctx.input["iterations"]))}


def policy_seq3(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step < len(SEQ_NODES):
        return hy.Next(SEQ_NODES[ctx.step], ctx.input)
    return hy.Finish(dict(ctx.state))


def policy_fanout8(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next(list(FAN_NODES), ctx.input)
    if ctx.step == 1:
        return hy.Next("join", len(ctx.parallel_results or ()))
    return hy.Finish(dict(ctx.state))


def policy_sleep8(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next(list(SLEEP_NODES), ctx.input)
    return hy.Finish(len(ctx.parallel_results or ()))


def policy_cpu2(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next(list(CPU_NODES), ctx.input)
    return hy.Finish(ctx.parallel_results)


def hy_item(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"item": ctx.item}


def policy_map100(ctx: hy.PolicyContext) -> hy.Map | hy.Finish:
    if ctx.step == 0:
        return hy.Map("item", list(range(MAP_ITEMS)))
    return hy.Finish(len(ctx.parallel_results or ()))


def policy_map_n(ctx: hy.PolicyContext) -> hy.Map | hy.Finish:
    """A map over as many items as the input says (``benchmarks.bench_map``)."""
    if ctx.step == 0:
        return hy.Map("item", list(range(int(ctx.input))))
    return hy.Finish(len(ctx.parallel_results or ()))


def policy_finish(ctx: hy.PolicyContext) -> hy.Finish:
    return hy.Finish(ctx.input)


RECOVERY_TASKS = 100


def hy_gate(ctx: hy.NodeContext) -> dict[str, Any]:
    """Blocks while the file ``ctx.input["gate"]`` exists (the crash happens meanwhile)."""
    while os.path.exists(ctx.input["gate"]):
        time.sleep(0.005)
    return {"gate": "passed"}


def policy_steps100(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """``RECOVERY_TASKS`` sequential trivial steps, then the gate, then finish."""
    if ctx.step < RECOVERY_TASKS:
        return hy.Next("step", ctx.input)
    if ctx.step == RECOVERY_TASKS:
        return hy.Next("gate", ctx.input)
    return hy.Finish({"steps": ctx.step})


SERVICE_NODES = ("plan", "llm", "answer")


def hy_plan(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"plan": f"plan {ctx.input['i']}"}


async def hy_llm(ctx: hy.NodeContext) -> dict[str, Any]:
    await asyncio.sleep(float(ctx.input["delay"]))
    return {"llm": f"reply {ctx.input['i']}"}


def hy_answer(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"answer": f"answer {ctx.input['i']}"}


def policy_service3(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step < len(SERVICE_NODES):
        return hy.Next(SERVICE_NODES[ctx.step], ctx.input)
    return hy.Finish(dict(ctx.state))


_HERE = "benchmarks.graphs"


def hy_service_config(agent_id: str = "service3", *, max_invocations: int = 1,
                      node_concurrency: dict[str, int] | None = None,
                      edge_concurrency: dict[str, int] | None = None,
                      execution_timeout: float = 600.0,
                      lease_seconds: float | None = None) -> hy.AgentConfig:
    """The ``service3`` agent: one agent serving ``max_invocations`` at once
    (``lease_seconds`` None: the runtime's default)."""
    extra: dict[str, Any] = {} if lease_seconds is None else {"lease_seconds": lease_seconds}
    return hy.AgentConfig(
        id=agent_id,
        nodes={"plan": f"{_HERE}:hy_plan", "llm": f"{_HERE}:hy_llm",
               "answer": f"{_HERE}:hy_answer"},
        decision_policy=f"{_HERE}:policy_service3", execution_timeout=execution_timeout,
        max_invocations=max_invocations, node_concurrency=node_concurrency or {},
        edge_concurrency=edge_concurrency or {}, **extra)


def hy_config(graph: str, agent_id: str | None = None) -> hy.AgentConfig:
    """The hayata_py agent for ``graph``."""
    nodes: dict[str, str]
    if graph in ("seq3", "finish"):
        nodes = {n: f"{_HERE}:hy_trivial" for n in SEQ_NODES}
    elif graph == "fanout8":
        nodes = {n: f"{_HERE}:hy_trivial" for n in (*FAN_NODES, "join")}
    elif graph == "sleep8":
        nodes = {n: f"{_HERE}:hy_sleep" for n in SLEEP_NODES}
    elif graph == "cpu2":
        nodes = {n: f"{_HERE}:hy_cpu" for n in CPU_NODES}
    elif graph in ("map100", "map_n"):
        nodes = {"item": f"{_HERE}:hy_item"}
    elif graph == "steps100":
        return hy.AgentConfig(
            id=agent_id or graph, nodes={"step": f"{_HERE}:hy_trivial", "gate": f"{_HERE}:hy_gate"},
            decision_policy=f"{_HERE}:policy_steps100", execution_timeout=60.0,
            max_steps=RECOVERY_TASKS + 1, idempotent_nodes=frozenset({"gate"}))
    else:
        raise ValueError(graph)
    return hy.AgentConfig(id=agent_id or graph, nodes=nodes,
                          decision_policy=f"{_HERE}:policy_{graph}",
                          execution_timeout=600.0 if graph == "map_n" else 60.0)


# -- LangGraph --------------------------------------------------------------------------


def _merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    return {**(a or {}), **(b or {})}


class LGState(TypedDict, total=False):
    input: Any
    iterations: int
    results: Annotated[dict[str, Any], _merge]
    count: Annotated[int, operator.add]


def _lg_trivial(name: str) -> Any:
    def node(state: LGState) -> dict[str, Any]:
        return {"results": {name: "done"}}
    node.__name__ = f"lg_{name}"
    return node


def _lg_sleep(name: str) -> Any:
    def node(state: LGState) -> dict[str, Any]:
        time.sleep(SLEEP_S)
        return {"results": {name: "slept"}}
    return node


def _lg_cpu(name: str) -> Any:
    def node(state: LGState) -> dict[str, Any]:
        return {"results": {name: cpu_work(int(state["iterations"]))}}
    return node


def lg_graph(graph: str, checkpointer: Any) -> Any:
    """The compiled LangGraph graph for ``graph``, checkpointing to ``checkpointer``."""
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(LGState)
    if graph == "seq3":
        for n in SEQ_NODES:
            g.add_node(n, _lg_trivial(n))
        g.add_edge(START, "n1")
        g.add_edge("n1", "n2")
        g.add_edge("n2", "n3")
        g.add_edge("n3", END)
    elif graph == "fanout8":
        for n in FAN_NODES:
            g.add_node(n, _lg_trivial(n))
            g.add_edge(START, n)
        g.add_node("join", _lg_trivial("join"))
        g.add_edge(list(FAN_NODES), "join")
        g.add_edge("join", END)
    elif graph in ("map100", "map_n"):
        from langgraph.types import Send

        def fan_out(state: LGState) -> list[Any]:
            count = MAP_ITEMS if graph == "map100" else int(state["input"])
            return [Send("item", {"input": i}) for i in range(count)]

        def item(state: LGState) -> dict[str, Any]:
            return {"count": 1}

        g.add_node("item", item)
        g.add_conditional_edges(START, fan_out, ["item"])
        g.add_edge("item", END)
    elif graph in ("sleep8", "cpu2"):
        names, make = (SLEEP_NODES, _lg_sleep) if graph == "sleep8" else (CPU_NODES, _lg_cpu)
        for n in names:
            g.add_node(n, make(n))
            g.add_edge(START, n)
            g.add_edge(n, END)
    else:
        raise ValueError(graph)
    return g.compile(checkpointer=checkpointer)


class LGServiceState(TypedDict, total=False):
    input: dict[str, Any]
    results: Annotated[dict[str, Any], _merge]


def _lg_plan(state: LGServiceState) -> dict[str, Any]:
    return {"results": {"plan": f"plan {state['input']['i']}"}}


async def _lg_llm(state: LGServiceState) -> dict[str, Any]:
    await asyncio.sleep(float(state["input"]["delay"]))
    return {"results": {"llm": f"reply {state['input']['i']}"}}


def _lg_answer(state: LGServiceState) -> dict[str, Any]:
    return {"results": {"answer": f"answer {state['input']['i']}"}}


def lg_service_graph(checkpointer: Any) -> Any:
    """The compiled ``service3`` graph (run with ``ainvoke``: ``llm`` is async)."""
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(LGServiceState)
    g.add_node("plan", _lg_plan)
    g.add_node("llm", _lg_llm)
    g.add_node("answer", _lg_answer)
    g.add_edge(START, "plan")
    g.add_edge("plan", "llm")
    g.add_edge("llm", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=checkpointer)


# -- bare Thespian floor: a ring of relays ------------------------------------------------


@dataclass(frozen=True)
class Ring:
    """Forwarded along ``route``; the last relay answers ``reply_to``."""

    route: tuple[Any, ...]
    reply_to: Any
    payload: Any = None


class Relay(Actor):  # type: ignore[misc]
    """Forwards a :class:`Ring` to the next address of its route (a bare hop)."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, Ring):
            reply_to = message.reply_to if message.reply_to is not None else sender
            if message.route:
                self.send(message.route[0], Ring(message.route[1:], reply_to, message.payload))
            else:
                self.send(reply_to, message.payload)
