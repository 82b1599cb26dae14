"""The hayata side of a LangGraph run: the decision policy and the node function.

Every LangGraph node of a compiled graph is a hayata node whose function is
:func:`run_node`; the agent's decision policy is :func:`decide`. Both import
the graph by its path (carried in the invocation's input) and drive
LangGraph's own loop through :mod:`hayata_py.langgraph._drive`.

Data of a step (all of it what the store can hold):

- the invocation input: ``{"r": settings, "s": snapshot, "prev": invocation,
  "in": pickled input}`` (or ``{"s", "prev", "op": "put"}``: record ``s`` as the
  thread's newest checkpoints); ``prev`` is the invocation whose result holds
  the thread's checkpoints before ``s`` (a chain, newest first);
- a step's input: ``{"r", "s", "k": carry, "tasks": {node: task id},
  "paths": {node: task path}, "lead": node, "c": pickled chunks}`` (``paths``:
  where the node finds its task without preparing the superstep's others);
  the *lead* task of a step (the first one) streams the chunks the previous
  superstep produced before it runs, and hands the snapshot and carry back in its result;
- a task's result: ``{"t": task id, "w": pickled writes, "i": interrupted,
  "f": failed}`` (+ ``"g"``: its subgraphs' checkpoints; + ``"s"``, ``"k"`` for
  the lead task);
- the result of the invocation: ``{"status", "s", "prev", "out", "c", "ints",
  "d"}`` (``ints``: every interrupt the run streamed), ``s`` the checkpoints
  its last decision made, ``d`` True: those of its earlier decisions are in
  its steps' inputs (:mod:`hayata_py.langgraph._checkpoints`).

A step's ``s`` holds the checkpoints the decision before it made, from the
latest it opened the loop at on, with every value that one refers to: all a
task needs to open the loop, and it grows with the graph's state, not with
the steps before it.
"""

from __future__ import annotations

from typing import Any

from hayata_py._policy import Finish, Map, Next, NodeContext, PolicyContext
from hayata_py.langgraph import _warm
from hayata_py.langgraph._drive import (
    Advancing,
    Carry,
    Outcome,
    Settings,
    TaskResult,
    advancing,
    arun_task,
    run_task,
)
from hayata_py.langgraph._snapshot import dump_value, load_value


def settings_of(data: dict[str, Any]) -> Settings:
    def breakpoints(value: Any) -> tuple[str, ...] | str:
        return "*" if value == "*" else tuple(value or ())

    return Settings(graph=data["graph"], thread_id=data["thread"],
                    configurable=load_value(data["configurable"]),
                    recursion_limit=int(data["recursion_limit"]),
                    modes=tuple(data["modes"]),
                    interrupt_before=breakpoints(data["interrupt_before"]),
                    interrupt_after=breakpoints(data["interrupt_after"]),
                    checkpoint_id=data.get("checkpoint_id"),
                    raise_nodes=tuple(data.get("raise_nodes") or ()),
                    output=bool(data.get("output")),
                    subgraphs=bool(data.get("subgraphs")),
                    context=data.get("context"), store=data.get("store"),
                    run_id=data.get("run_id"))


def decide(ctx: PolicyContext) -> Next | Map | Finish:
    """The agent's decision policy: LangGraph's loop says what runs next."""
    run: dict[str, Any] = ctx.input
    if run.get("op") == "put":
        return Finish({"status": "updated", "s": run["s"], "prev": run.get("prev"),
                       "out": dump_value(None), "c": dump_value([])})
    settings = settings_of(run["r"])
    carried: bytes | None = run["s"]
    try:
        if ctx.step == 0:
            opened = advancing(settings, carried, load_value(run["in"]), None, None)
            outcome = _first(opened)
        else:
            results: list[dict[str, Any]] = ctx.parallel_results or []
            lead = next(r for r in results if "s" in r)
            carried = lead["s"]
            # a task answered {"rerun": True} (compile(uncertain="interrupt")) runs again
            tasks = {r["t"]: TaskResult(load_value(r["w"]), bool(r["i"]), bool(r.get("f")),
                                        r.get("g"))
                     for r in results if not r.get("rerun")}
            warm = _warm.resume(ctx.invocation_id, ctx.step, run["r"], lead["s"], lead["k"],
                                tasks)
            if warm is None:
                opened = advancing(settings, carried, None, tasks, Carry.of(lead["k"]))
                outcome = _first(opened)
            else:
                opened, outcome = warm
        _warm.hold(ctx.invocation_id, ctx.step, run["r"], opened, outcome)
    except Exception as exc:  # noqa: BLE001 - LangGraph's loop refused: the caller gets it
        # as LangGraph raises it (EmptyInputError, InvalidUpdateError, ...); the
        # thread keeps the checkpoints the step started from
        _warm.drop(ctx.invocation_id)
        return Finish({"status": "error", "s": carried, "prev": run.get("prev"),
                       "out": dump_value(None), "c": dump_value([]),
                       "err": _exception(exc), "d": ctx.step > 0})
    return _answer(run["r"], outcome, run.get("prev"))


def _first(opened: Advancing) -> Outcome:
    """The outcome of a run's loop just opened: where it stops, or its end."""
    try:
        return next(opened)
    except StopIteration as end:
        return end.value  # type: ignore[no-any-return]


def _answer(settings: dict[str, Any], outcome: Outcome, prev: str | None
            ) -> Next | Map | Finish:
    chunks = dump_value(outcome.chunks)
    if outcome.status != "run":
        end = {"status": outcome.status, "s": outcome.snapshot, "prev": prev,
               "out": dump_value(outcome.output), "c": chunks,
               "ints": dump_value(outcome.carry.all_interrupts()), "d": True}
        if outcome.error is not None:
            end["err"] = _exception(outcome.error)
        return Finish(end)
    base = {"r": settings, "s": outcome.snapshot, "k": outcome.carry.as_dict()}
    names = [task.name for task in outcome.todo]
    if len(set(names)) == 1 and len(names) > 1:
        items = [{**base, "tasks": {task.name: task.id}, "paths": {task.name: task.path},
                  "lead": task.name if i == 0 else None, "c": chunks if i == 0 else None}
                 for i, task in enumerate(outcome.todo)]
        return Map(names[0], items)
    # distinct nodes run as one parallel step; when a superstep runs one node
    # several times beside others, one task of each node runs now and the rest
    # in the next steps (the loop applies the superstep's writes once all ran)
    first: dict[str, str] = {}
    paths: dict[str, Any] = {}
    for task in outcome.todo:
        if task.name not in first:
            first[task.name], paths[task.name] = task.id, task.path
    order = list(first)
    step_input = {**base, "tasks": first, "paths": paths, "lead": order[0], "c": chunks}
    # always a list: a parallel step's results do not touch the agent state,
    # so the thread's hayata state stays empty (the checkpoints are in results)
    return Next(order, step_input)


def _exception(error: BaseException) -> bytes:
    """The node's exception, for the caller to raise; one that does not pickle
    becomes a RuntimeError naming it."""
    try:
        return dump_value(error)
    except Exception:  # noqa: BLE001 - any pickling failure
        return dump_value(RuntimeError(f"{type(error).__name__}: {error}"))


def _prepare(ctx: NodeContext) -> tuple[Settings, dict[str, Any], bool, Any]:
    step: dict[str, Any] = ctx.input
    lead = step["lead"] == ctx.node_id and not ctx.item
    streamer = ctx.streamer
    emit = None
    if streamer is not None:
        if lead:
            streamer({"p": step["c"]})
        emit = lambda chunk: streamer({"x": dump_value(chunk)})  # noqa: E731
    return settings_of(step["r"]), step, lead, emit


def _result(step: dict[str, Any], task_id: str, lead: bool, result: TaskResult
            ) -> dict[str, Any]:
    out: dict[str, Any] = {"t": task_id, "w": dump_value(result.writes), "i": result.interrupted,
                           "f": result.failed}
    if result.subgraphs is not None:
        out["g"] = result.subgraphs
    if lead:
        out["s"] = step["s"]
        out["k"] = step["k"]
    return out


def _path(step: dict[str, Any], node: str) -> tuple[str, str | int] | None:
    """The node's task path in the step's input (none in a step recorded
    without paths: then the node prepares the whole superstep to find it)."""
    path = (step.get("paths") or {}).get(node)
    return tuple(path) if path is not None else None


def run_node(ctx: NodeContext) -> dict[str, Any]:
    """Every LangGraph node's hayata function: run this node's task of the superstep."""
    settings, step, lead, emit = _prepare(ctx)
    task_id: str = step["tasks"][ctx.node_id]
    result = run_task(settings, step["s"], Carry.of(step["k"]), task_id, emit, ctx.attempt,
                      _path(step, ctx.node_id))
    return _result(step, task_id, lead, result)


async def arun_node(ctx: NodeContext) -> dict[str, Any]:
    """:func:`run_node` for a LangGraph ``async def`` node (on the edge's event loop)."""
    settings, step, lead, emit = _prepare(ctx)
    task_id: str = step["tasks"][ctx.node_id]
    result = await arun_task(settings, step["s"], Carry.of(step["k"]), task_id, emit,
                             ctx.attempt, _path(step, ctx.node_id))
    return _result(step, task_id, lead, result)
