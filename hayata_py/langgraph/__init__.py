"""Run a LangGraph ``StateGraph`` on hayata_py: every LangGraph task a durable,
supervised hayata task.

```python
from hayata_py import langgraph as hylg

app = hylg.compile(builder, system)       # instead of builder.compile(checkpointer=...)
app.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "user-42"}})
```

LangGraph's own loop decides what runs (see :mod:`hayata_py.langgraph._drive`);
hayata runs each task in a node's edge process, records it before and after,
and keeps the thread's checkpoints in its store. See docs/guide/langgraph.md.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Sequence
from typing import Any

from langgraph.constants import START
from langgraph.graph.state import CompiledStateGraph

from hayata_py._api import AgentSystem
from hayata_py._async import AsyncAgentSystem
from hayata_py._config import AgentConfig
from hayata_py._errors import AgentAlreadyStarted, ConfigError
from hayata_py._policy import RetryPolicy
from hayata_py.langgraph._app import HayataGraph, thread_of
from hayata_py.langgraph._errors import RetryableTaskError, TaskUncertain
from hayata_py.langgraph._graphref import builder_of, graph_path, resolve
from hayata_py.langgraph._store import HayataStore, store_spec

__all__ = ["HayataGraph", "HayataStore", "TaskUncertain", "acompile", "compile", "thread_of"]

_STARTED: weakref.WeakKeyDictionary[AgentSystem, dict[str, AgentConfig]] = \
    weakref.WeakKeyDictionary()
"""The config each agent was started with by :func:`compile`, per system: a
second ``compile`` with the same id shares the agent only with the same options."""

NODE_FUNCTION = "hayata_py.langgraph._steps:run_node"
ASYNC_NODE_FUNCTION = "hayata_py.langgraph._steps:arun_node"
POLICY = "hayata_py.langgraph._steps:decide"


async def acompile(graph: Any, system: AgentSystem | AsyncAgentSystem, **kwargs: Any
                   ) -> HayataGraph:
    """:func:`compile` from an event loop (starting the agent blocks, so it
    runs on a thread)."""
    return await asyncio.to_thread(compile, graph, system, **kwargs)


def compile(graph: Any, system: AgentSystem | AsyncAgentSystem, *, id: str | None = None,
            checkpointer: Any = None, store: Any = None,
            interrupt_before: Sequence[str] | str | None = None,
            interrupt_after: Sequence[str] | str | None = None,
            uncertain: str = "raise", timeout: float = 300.0,
            **agent_options: Any) -> HayataGraph:
    """Start a hayata agent that runs ``graph`` and return its LangGraph face.

    - ``graph``: a ``StateGraph`` builder, a compiled graph (its builder is
      used) or a ``"package.module:name"`` path to either. Node processes
      import it by that path, so an object must be bound at module level of
      an importable module (else ``hy.ConfigError("graph")`` says how).
    - ``system``: the :class:`~hayata_py.AgentSystem` (or a started
      :class:`~hayata_py.AsyncAgentSystem`: then use ``ainvoke``/``astream``)
      the agent runs on.
    - ``id``: the agent id (default: the graph's path, ``:`` as ``.``). A
      second ``compile`` with the id of a running agent shares it if its agent
      options are the same (``hy.ConfigError("id")`` if not).
    - ``checkpointer``: must be None: hayata's store keeps the checkpoints.
    - ``store``: LangGraph's store, which nodes reach by ``get_store()``,
      ``runtime.store`` or a ``store`` parameter: :class:`HayataStore`
      (``HayataStore(system)``: durable, in hayata's database), another
      ``BaseStore`` that pickles (each node process unpickles its own copy),
      or a ``"package.module:name"`` path to a store or a function returning
      one. An ``InMemoryStore`` is refused: the nodes run in other processes.
      A compiled graph's own store is used when this is None.
    - ``interrupt_before`` / ``interrupt_after``: static breakpoints, as LangGraph's.
    - ``uncertain``: ``"raise"``: a task a crash left uncertain raises
      :class:`TaskUncertain` on ``invoke(None, config)``; ``"interrupt"``: the
      run stops with an interrupt asking about it, answered with
      ``Command(resume={"completed": update} | {"rerun": True} | {"abandon": True})``
      (see :mod:`hayata_py.langgraph._uncertain`).
    - ``timeout``: seconds a caller waits for the next event of a run.
    - ``agent_options``: :class:`~hayata_py.AgentConfig` fields, node options keyed
      by LangGraph node name (``node_timeouts``, ``idempotent_nodes``, ...).

    Nothing is started when an argument is refused.
    """
    if checkpointer is not None:
        raise ConfigError("checkpointer", "hayata's durable store is the checkpointer of a "
                          "graph run by hayata_py.langgraph: leave checkpointer out (None)")
    spec = store_spec(store)
    if uncertain not in ("raise", "interrupt"):
        raise ConfigError("uncertain", f"must be 'raise' or 'interrupt', got {uncertain!r}")
    async_system = system if isinstance(system, AsyncAgentSystem) else None
    if isinstance(system, AsyncAgentSystem):
        system = system.sync
    if not isinstance(system, AgentSystem):
        raise ConfigError("system", f"expected a hayata_py AgentSystem or AsyncAgentSystem, "
                          f"got {type(system).__name__}")
    for name in ("nodes", "decision_policy"):
        if name in agent_options:
            raise ConfigError(name, "set by hayata_py.langgraph from the graph's nodes")
    path = graph_path(graph)
    builder = builder_of(path)
    _refuse_unsupported(builder)
    given = resolve(path)
    if isinstance(given, CompiledStateGraph):
        # a compiled graph: its breakpoints carry over; what hayata replaces is refused
        for name, value in (("checkpointer", given.checkpointer), ("cache", given.cache)):
            if value not in (None, False):
                raise ConfigError(name, f"the compiled graph has a {name}: hayata's store "
                                  "keeps the checkpoints and LangGraph's cache is not "
                                  "carried over; compile it without one (or pass the "
                                  "builder)")
        if spec is None and given.store is not None:
            try:
                spec = store_spec(given.store)
            except ConfigError as exc:
                raise ConfigError("store", f"the compiled graph's store is refused: "
                                  f"{exc.message.removeprefix('store: ')}; "
                                  "compile(..., store=...) replaces it") from exc
        interrupt_before = interrupt_before or given.interrupt_before_nodes or None
        interrupt_after = interrupt_after or given.interrupt_after_nodes or None
    compiled_graph = builder.compile()
    agent_id = id if id is not None else path.replace(":", ".")
    options = {"max_steps": 1_000_000, "execution_timeout": timeout, **agent_options}
    user_retry = dict(options.get("retry") or {})
    retry = {**_mapped_retries(builder), **user_retry}
    if retry:
        options["retry"] = retry
    # every LangGraph node but __start__, which the decision policy runs itself
    nodes = {name: ASYNC_NODE_FUNCTION if _is_async(builder, name) else NODE_FUNCTION
             for name in compiled_graph.nodes if name != START}
    config = AgentConfig(id=agent_id, nodes=nodes,
                         decision_policy=POLICY, **options)
    started = _STARTED.setdefault(system, {})
    try:
        agent = system.start_agent(config)
    except AgentAlreadyStarted:
        if started.get(agent_id, config) != config:
            raise ConfigError("id", f"agent {agent_id!r} already runs this graph with other "
                              "agent options: stop it first (system.stop_agent) or give "
                              "this one another id") from None
        agent = system.agent(agent_id)
    started[agent_id] = config
    raise_nodes = set(user_retry) if config.default_retry is None else set(config.nodes)
    return HayataGraph(path, system, agent, interrupt_before=interrupt_before,
                       interrupt_after=interrupt_after, uncertain=uncertain, timeout=timeout,
                       raise_nodes=raise_nodes, async_system=async_system, store=spec)


def _mapped_retries(builder: Any) -> dict[str, RetryPolicy]:
    """hayata's durable retry for each node with a LangGraph ``retry_policy``:
    its intervals from the node's first policy, as many attempts as its most
    generous one; which exceptions are retried, and when to stop, the node's
    task decides with LangGraph's own rules (it raises :class:`RetryableTaskError`)."""
    mapped: dict[str, RetryPolicy] = {}
    for name, spec in builder.nodes.items():
        policies = spec.retry_policy
        if not policies:
            continue
        if not isinstance(policies, (list, tuple)) or hasattr(policies, "_fields"):
            policies = [policies]
        first = policies[0]
        mapped[name] = RetryPolicy(
            max_attempts=max(p.max_attempts for p in policies),
            initial_interval=first.initial_interval, backoff=first.backoff_factor,
            max_interval=max(first.max_interval, first.initial_interval), jitter=first.jitter,
            retry_on=(RetryableTaskError,))
    return mapped


def async_nodes(graph: Any) -> list[str]:
    """The ``async def`` nodes of ``graph`` (as :func:`compile` takes it): those
    whose tasks an edge may run many at once (``edge_concurrency``)."""
    builder = builder_of(graph_path(graph))
    return [name for name in builder.nodes if _is_async(builder, name)]


def _is_async(builder: Any, name: str) -> bool:
    """Whether LangGraph would run node ``name`` only as a coroutine (an
    ``async def`` node): its task then runs on its edge's event loop."""
    spec = builder.nodes.get(name)
    if spec is None:
        return False
    runnable = spec.runnable
    func = getattr(runnable, "func", None)
    return getattr(runnable, "afunc", None) is not None and (
        func is None or inspect.iscoroutinefunction(func))


def _refuse_unsupported(builder: Any) -> None:
    """What hayata_py.langgraph cannot run as LangGraph would: refused here,
    before anything starts, never half-run."""
    for name, spec in builder.nodes.items():
        if spec.is_error_handler or spec.error_handler_node:
            raise ConfigError(f"nodes[{name!r}]", "LangGraph error-handler nodes are not "
                              "supported by hayata_py.langgraph: handle the error in the "
                              "node, or use hayata's retry (retry_policy) and compensate")
        if spec.cache_policy is not None:
            raise ConfigError(f"nodes[{name!r}]", "a node cache_policy is not supported by "
                              "hayata_py.langgraph: drop it and use hayata's durable cache, "
                              "compile(..., cache={node: hy.CachePolicy(...)})")
        if spec.timeout is not None:
            raise ConfigError(f"nodes[{name!r}]", "a node timeout is not supported by "
                              "hayata_py.langgraph: drop it and use compile(..., "
                              "node_timeouts={node: seconds})")
