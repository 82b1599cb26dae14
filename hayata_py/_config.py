"""Agent configuration: the user's frozen dataclass and its validated form."""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hayata_py._cache import CachePolicy, validate_cache
from hayata_py._callables import callable_path, exception_path, resolve_callable
from hayata_py._circuit import CircuitBreaker, checked
from hayata_py._codec import check_encodable
from hayata_py._errors import ConfigError, EncodingError
from hayata_py._policy import RetryPolicy

T = TypeVar("T")

MAX_MAP_CONCURRENCY = 1024
"""The most items of a map step an agent runs at once (each on its own edge process)."""
MAX_EXECUTION_TIMEOUT = 365 * 24 * 3600
"""The longest ``execution_timeout`` accepted (seconds): the runtime's timers hold it."""
MAX_INVOCATIONS = 1_000_000
"""The largest ``max_invocations`` accepted (invocations in flight on one agent)."""
MAX_EDGE_CONCURRENCY = 10_000
"""The most tasks one edge of an ``async def`` node runs at once on its event loop."""


def default_node_concurrency() -> int:
    """Edges a node may grow to when tasks wait: the core count, at least 4."""
    return max(4, os.cpu_count() or 1)


@dataclass(frozen=True)
class AgentConfig:
    """How an agent runs.

    - ``id``: the agent id (non-empty string).
    - ``nodes``: node id -> module-level function or ``"package.module:function"``.
    - ``decision_policy``: a module-level function or path; called with a
      :class:`PolicyContext`, answers :class:`Next` or :class:`Finish`.
    - ``state``: the initial state of every invocation (must be msgpack-encodable).
    - ``max_steps``: transitions allowed per invocation (> 0).
    - ``execution_timeout``: seconds one node execution may take (> 0, at most
      :data:`MAX_EXECUTION_TIMEOUT`, 365 days); for a map step, the whole step
      (all its items and the reduce).
    - ``idempotent_nodes``: node ids whose uncertain tasks may be re-run on recovery
      (a set, frozenset, list or tuple of node ids).
    - ``placement``: capabilities the agent's processes need, e.g.
      ``{"region": "eu"}``: the whole agent runs in an actor system of the
      convention whose ``capabilities`` include them (empty: the local system).
    - ``node_placement``: node id -> capabilities that node needs, e.g.
      ``{"embed": {"gpu": True}}``: the node (and its edges) runs in a system
      that has them, the rest of the agent where the agent runs.
    - ``lease_seconds``: each invocation is owned under a lease in the store,
      renewed every third of this while it runs. If the owning system dies,
      another system may recover the invocation once the lease has expired.
    - ``map_concurrency``: items of a map step (:class:`Map`) run at once, at
      most, each on its own edge of the node (an int from 1 to
      :data:`MAX_MAP_CONCURRENCY`; default: the machine's core count). The
      items of a fast node go to each edge in chains of up to 8, run one
      after another there.
    - ``node_timeouts``: node id -> seconds one run of that node may take,
      overriding ``execution_timeout`` for it (same limits), e.g.
      ``{"llm": 300, "lookup": 5}``.
    - ``pause_before`` / ``pause_after``: node ids: the invocation pauses
      durably before a step with one of them starts (nothing of it has run) or
      after it completed, until ``agent.resume(invocation_id, value)``.
    - ``retry``: node id -> :class:`RetryPolicy` for that node;
      ``default_retry``: the policy of every other node (None: no retries).
    - ``max_invocations``: invocations the agent runs at once (an int from 1 to
      :data:`MAX_INVOCATIONS`). 1, the default, is Hayata's agent: one
      invocation at a time, and an unfinished one blocks new runs until it is
      recovered. With N > 1 the agent is a service: up to N run at once, each
      with its own record, deadlines, retries, pauses, events and result, and
      an unfinished one waits for its own recovery without blocking the others.
    - ``node_concurrency``: node id -> the most edges (processes) that node
      grows to while its tasks wait (default: the core count, at least 4).
      Idle edges beyond one are retired after ``edge_idle_timeout`` seconds.
    - ``edge_concurrency``: node id -> tasks one edge of that ``async def``
      node runs at once on its event loop (default 1). Only for ``async def``
      nodes: a plain function always runs one task per edge. A SIGKILLed edge
      ends every task it was running as ``node_failed`` (re-run at once on
      another edge for a node in ``idempotent_nodes``).
    - ``edge_idle_timeout``: seconds an idle edge beyond a node's first is
      kept before it is retired (> 0, default 60).
    - ``auto_recover``: when the agent starts or restarts, recover by itself
      every unfinished invocation whose interrupted tasks are all completed,
      not started, due a retry or idempotent; one with an uncertain task
      waits for ``resolve_task``/``abandon``, listed by ``unfinished()``.
    - ``cache``: node id -> :class:`CachePolicy`: that node's completed results
      are kept in the store and reused for tasks with the same key
      (docs/guide/caching.md). Needs a store (a data_dir or store_url).
    - ``circuit``: node id -> :class:`CircuitBreaker`: after that many failures of
      the node within its window its tasks fail at once (``circuit_open``)
      until a probe after the cool-down succeeds (docs/guide/circuit-breakers.md).
    - ``compensate``: node id -> its compensator (a module-level function or
      ``"package.module:function"``): when an invocation ends failed or is
      abandoned, each completed task of that node is undone by it, once,
      latest first; it is called like a node, ``ctx.input`` holding the task's
      ``task_id``, ``node_id``, ``input`` and ``result`` (docs/guide/compensation.md).
    """

    id: str
    nodes: Mapping[str, Any]
    decision_policy: Any
    state: Mapping[str, Any] = field(default_factory=dict)
    max_steps: int = 10
    execution_timeout: float = 30.0
    idempotent_nodes: frozenset[str] = frozenset()
    placement: Mapping[str, Any] = field(default_factory=dict)
    node_placement: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    lease_seconds: float = 10.0
    map_concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    node_timeouts: Mapping[str, float] = field(default_factory=dict)
    retry: Mapping[str, RetryPolicy] = field(default_factory=dict)
    default_retry: RetryPolicy | None = None
    pause_before: frozenset[str] = frozenset()
    pause_after: frozenset[str] = frozenset()
    max_invocations: int = 1
    node_concurrency: Mapping[str, int] = field(default_factory=dict)
    edge_concurrency: Mapping[str, int] = field(default_factory=dict)
    edge_idle_timeout: float = 60.0
    auto_recover: bool = False
    cache: Mapping[str, CachePolicy] = field(default_factory=dict)
    circuit: Mapping[str, CircuitBreaker] = field(default_factory=dict)
    compensate: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Liveness:
    """How fast a system notices that another system of its convention died.

    - ``heartbeat`` / ``heartbeat_misses``: supervisors ping every child placed
      on another system every ``heartbeat`` seconds; one that left
      ``heartbeat_misses`` pings in a row unanswered is taken for dead and
      restarted (on a system that satisfies its placement): noticed
      ``heartbeat * heartbeat_misses`` to ``heartbeat * (heartbeat_misses + 1)``
      seconds after it died. Costs about 4 ms of CPU per ping.
    - ``convention_period`` / ``convention_misses``: members re-register with
      the leader every ``convention_period`` seconds and are dropped after
      ``convention_misses`` missed registrations (Thespian's own, slower check).
    """

    heartbeat: float = 0.5
    heartbeat_misses: int = 3
    convention_period: float = 5.0
    convention_misses: int = 3

    def __post_init__(self) -> None:
        for name, low, high in (("heartbeat", 0.01, 60.0), ("convention_period", 1.0, 3600.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or not low <= value <= high:
                raise ConfigError(f"liveness.{name}",
                                  f"must be seconds between {low} and {high}, got {value!r}")
        for name in ("heartbeat_misses", "convention_misses"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"liveness.{name}", f"must be an int >= 1, got {value!r}")


@dataclass(frozen=True)
class AgentSpec:
    """A validated :class:`AgentConfig`: plain, picklable data with functions as paths."""

    id: str
    nodes: dict[str, str]
    policy: str
    state: dict[str, Any]
    max_steps: int
    execution_timeout: float
    idempotent_nodes: frozenset[str]
    placement: dict[str, Any] = field(default_factory=dict)
    node_placement: dict[str, dict[str, Any]] = field(default_factory=dict)
    lease_seconds: float = 10.0
    owner: str = ""
    """Set by the AgentSystem: the lease owner, i.e. the system's stable name."""
    liveness: Liveness = Liveness()
    """Set by the AgentSystem: heartbeat settings of the agent's supervisors."""
    store_url: str = ""
    """Set by the AgentSystem: where the agent and its edges record their work."""
    instance: str = ""
    """Set by the AgentSystem: the id of this system start (recorded with each task
    as the system instance that ran it; the lease owner is ``owner``)."""
    map_concurrency: int = 1
    """Items of a map step out at once, at most."""

    node_timeouts: dict[str, float] = field(default_factory=dict)
    """Node id -> seconds one run of it may take (else ``execution_timeout``)."""

    retry: dict[str, RetryPolicy] = field(default_factory=dict)
    """Node id -> its retry policy (``retry_on`` as ``module:Class`` paths); nodes
    without one are not retried."""

    pause_before: frozenset[str] = frozenset()
    pause_after: frozenset[str] = frozenset()

    max_invocations: int = 1
    """Invocations in flight at once, at most (1: Hayata's one at a time)."""
    node_concurrency: dict[str, int] = field(default_factory=dict)
    """Node id -> the most edges it grows to (every node has an entry)."""
    edge_concurrency: dict[str, int] = field(default_factory=dict)
    """Node id -> tasks one edge runs at once (every node; > 1 only for async nodes)."""
    edge_idle_timeout: float = 60.0
    """Seconds an idle edge beyond a node's first is kept."""
    auto_recover: bool = False
    """Recover unfinished invocations without an uncertain task when the agent starts."""
    cache: dict[str, CachePolicy] = field(default_factory=dict)
    """Node id -> its cache policy (``key`` an import path or None)."""
    circuit: dict[str, CircuitBreaker] = field(default_factory=dict)
    """Node id -> its circuit breaker (nodes without one are always let through)."""
    compensate: dict[str, str] = field(default_factory=dict)
    """Node id -> its compensator's import path."""

    def timeout_for(self, node_id: str) -> float:
        return self.node_timeouts.get(node_id, self.execution_timeout)


def validate_config(config: Any) -> AgentSpec:
    """Check every field of ``config``; raise :class:`ConfigError` naming the first bad one."""
    if not isinstance(config, AgentConfig):
        raise ConfigError("config", f"expected hy.AgentConfig, got {type(config).__name__}")
    if not isinstance(config.id, str) or not config.id.strip():
        raise ConfigError("id", f"must be a non-empty string, got {config.id!r}")
    if any(c in config.id for c in "/\\\x00") or config.id != config.id.strip():
        raise ConfigError("id", f"{config.id!r} may not contain '/', '\\\\', NUL or "
                                "surrounding spaces")
    if not isinstance(config.nodes, Mapping) or not config.nodes:
        raise ConfigError("nodes", "must be a non-empty mapping of node id -> function")
    nodes: dict[str, str] = {}
    for node_id, fn in config.nodes.items():
        if not isinstance(node_id, str) or not node_id:
            raise ConfigError("nodes", f"node ids must be non-empty strings, got {node_id!r}")
        nodes[node_id] = callable_path(fn, f"nodes[{node_id!r}]")
    policy = callable_path(config.decision_policy, "decision_policy")
    if isinstance(config.max_steps, bool) or not isinstance(config.max_steps, int) \
            or config.max_steps <= 0:
        raise ConfigError("max_steps", f"must be a positive int, got {config.max_steps!r}")
    timeout = _timeout(config.execution_timeout, "execution_timeout")
    node_timeouts = _per_node(config.node_timeouts, "node_timeouts", "seconds", nodes, _timeout)
    if not isinstance(config.state, Mapping):
        raise ConfigError("state", f"must be a dict, got {type(config.state).__name__}")
    state = dict(config.state)
    if not all(isinstance(k, str) for k in state):
        raise ConfigError("state", "keys must be strings")
    try:
        check_encodable(state, "state")
    except EncodingError as exc:
        raise ConfigError("state", f"cannot be stored durably: {exc}",
                          key=exc.details.get("key")) from exc
    idempotent = _known(config.idempotent_nodes, "idempotent_nodes", nodes)
    placement = valid_capabilities(config.placement, "placement")
    node_placement = _per_node(config.node_placement, "node_placement", "capabilities", nodes,
                               valid_capabilities)
    lease = config.lease_seconds
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) \
            or not math.isfinite(lease) or not 0.5 <= lease <= 3600:
        raise ConfigError("lease_seconds", f"must be seconds between 0.5 and 3600, got {lease!r}")
    concurrency = config.map_concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) \
            or not 1 <= concurrency <= MAX_MAP_CONCURRENCY:
        raise ConfigError("map_concurrency", f"must be an int from 1 to {MAX_MAP_CONCURRENCY} "
                          f"(items of a map step run at once), got {concurrency!r}")
    return AgentSpec(config.id, nodes, policy, state, config.max_steps, timeout,
                     idempotent, placement, node_placement, float(lease),
                     map_concurrency=concurrency,
                     node_timeouts=node_timeouts, retry=_retries(config, nodes),
                     pause_before=_known(config.pause_before, "pause_before", nodes),
                     pause_after=_known(config.pause_after, "pause_after", nodes),
                     cache=validate_cache(config.cache, nodes),
                     circuit=_per_node(config.circuit, "circuit", "hy.CircuitBreaker", nodes,
                                       checked),
                     compensate=_per_node(config.compensate, "compensate",
                                          "compensator function", nodes, callable_path),
                     **_service(config, nodes))


def _positive_int(value: Any, field_name: str, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ConfigError(field_name, f"must be an int from 1 to {high} ({what}), "
                          f"got {value!r}")
    return value


def _service(config: AgentConfig, nodes: dict[str, str]) -> dict[str, Any]:
    """The fields of an agent that serves many invocations, checked."""
    most = _positive_int(config.max_invocations, "max_invocations", MAX_INVOCATIONS,
                         "invocations the agent runs at once")
    grown = _per_node(config.node_concurrency, "node_concurrency", "edges", nodes,
                      lambda v, where: _positive_int(v, where, MAX_MAP_CONCURRENCY,
                                                     "edges the node grows to"))
    per_edge = _per_node(config.edge_concurrency, "edge_concurrency", "tasks", nodes,
                         lambda v, where: _positive_int(v, where, MAX_EDGE_CONCURRENCY,
                                                        "tasks one edge runs at once"))
    for node_id, count in per_edge.items():
        if count > 1 and not _is_async(nodes[node_id]):
            raise ConfigError(f"edge_concurrency[{node_id!r}]",
                              f"node {node_id!r} is a plain function: an edge runs one of "
                              "its tasks at a time; edge_concurrency is for async def nodes "
                              "(raise node_concurrency for more edges instead)")
    idle = config.edge_idle_timeout
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) \
            or not math.isfinite(idle) or not 0 < idle <= MAX_EXECUTION_TIMEOUT:
        raise ConfigError("edge_idle_timeout", f"must be a positive number of seconds, "
                          f"got {idle!r}")
    if not isinstance(config.auto_recover, bool):
        raise ConfigError("auto_recover", f"must be True or False, got "
                          f"{config.auto_recover!r}")
    default = default_node_concurrency()
    return {"max_invocations": most,
            "node_concurrency": {n: grown.get(n, default) for n in nodes},
            "edge_concurrency": {n: per_edge.get(n, 1) for n in nodes},
            "edge_idle_timeout": float(idle), "auto_recover": config.auto_recover}


def _is_async(path: str) -> bool:
    """The node function at ``path`` is an ``async def`` (checked by callable_path
    to import already)."""
    try:
        fn = resolve_callable(path)
    except Exception:  # noqa: BLE001 - callable_path has checked it imports
        return False
    return inspect.iscoroutinefunction(fn)


def _per_node(value: Any, field_name: str, what: str, nodes: dict[str, str],
              check: Callable[[Any, str], T]) -> dict[str, T]:
    """``{node id: check(entry, "field[node]")}`` for a mapping of known node ids."""
    if not isinstance(value, Mapping):
        raise ConfigError(field_name, f"must be a mapping of node id -> {what}, got "
                          f"{type(value).__name__}")
    out = {}
    for node_id, entry in value.items():
        if node_id not in nodes:
            raise ConfigError(field_name, f"unknown node id {node_id!r} (nodes: {sorted(nodes)})")
        out[node_id] = check(entry, f"{field_name}[{node_id!r}]")
    return out


def _known(value: Any, field_name: str, nodes: dict[str, str]) -> frozenset[str]:
    ids = _node_ids(value, field_name)
    unknown = sorted(ids - set(nodes))
    if unknown:
        raise ConfigError(field_name, f"unknown node ids {unknown} (nodes: {sorted(nodes)})")
    return ids


def _retries(config: AgentConfig, nodes: dict[str, str]) -> dict[str, RetryPolicy]:
    """Each node's retry policy, ``retry_on`` checked and turned into import paths."""
    given: dict[str, Any] = _per_node(config.retry, "retry", "hy.RetryPolicy", nodes,
                                      lambda policy, _where: policy)
    if config.default_retry is not None:
        given = {n: given.get(n, config.default_retry) for n in nodes}
    out = {}
    for node_id, policy in given.items():
        where = "default_retry" if policy is config.default_retry \
            and node_id not in config.retry else f"retry[{node_id!r}]"
        if not isinstance(policy, RetryPolicy):
            raise ConfigError(where, f"must be a hy.RetryPolicy, got {type(policy).__name__}")
        paths = tuple(exception_path(c, f"{where}.retry_on") for c in policy.retry_on)
        out[node_id] = dataclasses.replace(policy, retry_on=paths)
    return out


def _timeout(value: Any, field_name: str) -> float:
    """Seconds a node run may take: positive, finite, at most 365 days."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ConfigError(field_name, f"must be a positive number of seconds, got {value!r}")
    if value > MAX_EXECUTION_TIMEOUT:
        raise ConfigError(field_name, f"must be at most {MAX_EXECUTION_TIMEOUT} s "
                          f"(365 days), got {value!r}")
    return float(value)


def valid_capabilities(value: Any, field_name: str = "capabilities") -> dict[str, Any]:
    """A placement: capability name -> the value a system must declare."""
    if not isinstance(value, Mapping):
        raise ConfigError(field_name, f"must be a mapping of capability -> value, e.g. "
                                      f"{{'gpu': True}}; got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(field_name, f"capability names must be non-empty strings, "
                                          f"got {key!r}")
        if not isinstance(item, (str, int, float, bool)):
            raise ConfigError(field_name, f"capability {key!r} must be a str, int, float "
                                          f"or bool, got {type(item).__name__}")
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(field_name, f"capability {key!r} must be a finite number, got "
                                          f"{item!r} (NaN equals nothing, so never matches)")
    return dict(value)


def _node_ids(value: Any, field_name: str) -> frozenset[str]:
    """A set, frozenset, list or tuple of node ids (a lone string is refused)."""
    if not isinstance(value, (set, frozenset, list, tuple)) \
            or not all(isinstance(item, str) for item in value):
        raise ConfigError(field_name, "must be a set of node ids, e.g. frozenset({'fetch'}); "
                                      f"got {value!r}")
    return frozenset(value)
