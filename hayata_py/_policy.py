"""What a decision policy sees and answers, and the pure checks on its answer."""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from hayata_py._codec import check_encodable
from hayata_py._errors import ConfigError, EncodingError, ErrorInfo


@dataclass(frozen=True)
class Next:
    """Run ``node`` (a node id) with ``input``; or, with a list of distinct ids,
    run them in parallel, all with the same input and state snapshot."""

    node: str | list[str] | tuple[str, ...]
    input: Any = None


@dataclass(frozen=True)
class Map:
    """Run ``node``'s function once per entry of ``items`` (a non-empty list): a map step.

    Each item is its own durable task (``ctx.input`` is the item, ``ctx.item``
    its index), at most ``AgentConfig.map_concurrency`` at once; the first
    failing item fails the step and cancels the others. Without ``reduce`` the
    next decision sees the items' results as ``ctx.parallel_results`` (item
    order). With ``reduce`` (a ``"package.module:function"`` string or a
    module-level function, ``list[dict] -> dict``) the node's reducer runs it on
    the results in item order and its result is the step's result: merged into
    the state and set as ``last_result``, like a sequential node's.
    """

    node: str
    items: list[Any]
    reduce: Any = None


@dataclass(frozen=True)
class Finish:
    """End the invocation successfully with ``result``."""

    result: Any = None


@dataclass(frozen=True)
class Pause:
    """Pause the invocation durably with ``payload`` (msgpack-encodable: what a
    person must see to decide, e.g. the tool call awaiting approval). It waits,
    across restarts, until ``agent.resume(invocation_id, value)``; the next
    decision then sees ``ctx.resume_value``."""

    payload: Any = None


@dataclass(frozen=True)
class RetryPolicy:
    """How often a node is tried again after it raised, and how long to wait.

    A retry follows only a *known* failure: the node function raised an
    exception matching ``retry_on`` and the edge recorded the failure. An
    attempt interrupted by a crash stays uncertain and is never retried.

    - ``max_attempts``: attempts in all, the first included (>= 1; 1: no retry).
    - ``initial_interval``: seconds before the second attempt (>= 0).
    - ``backoff``: each further wait is this many times the previous (>= 1).
    - ``max_interval``: no wait is longer (>= ``initial_interval``).
    - ``jitter``: wait between half and all of the computed interval, chosen
      from the task id and the attempt (so the same after a restart).
    - ``retry_on``: exception classes, or ``"module:Class"`` strings, worth a
      retry (default: every ``Exception``); subclasses match.
    """

    max_attempts: int = 3
    initial_interval: float = 0.5
    backoff: float = 2.0
    max_interval: float = 30.0
    jitter: bool = True
    retry_on: tuple[type[BaseException] | str, ...] = (Exception,)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) \
                or not 1 <= self.max_attempts <= 1000:
            raise ConfigError("max_attempts", "must be an int from 1 to 1000, got "
                              f"{self.max_attempts!r}")
        for name, low in (("initial_interval", 0.0), ("backoff", 1.0),
                          ("max_interval", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or not low <= value <= 86400 * 365:
                raise ConfigError(name, f"must be a finite number >= {low} (at most 365 "
                                  f"days), got {value!r}")
        if self.max_interval < self.initial_interval:
            raise ConfigError("max_interval", f"must be >= initial_interval "
                              f"({self.initial_interval!r}), got {self.max_interval!r}")
        if not isinstance(self.jitter, bool):
            raise ConfigError("jitter", f"must be True or False, got {self.jitter!r}")
        retry_on: Any = self.retry_on
        if isinstance(retry_on, (str, type)):
            retry_on = (retry_on,)
        if not isinstance(retry_on, (tuple, list, frozenset, set)) or not retry_on:
            raise ConfigError("retry_on", "must be a non-empty tuple of exception classes "
                              f"or 'module:Class' strings, got {self.retry_on!r}")
        for item in retry_on:
            if isinstance(item, type) and issubclass(item, BaseException):
                continue
            if isinstance(item, str) and item.count(":") == 1 and all(item.split(":")):
                continue
            raise ConfigError("retry_on", f"{item!r} is not an exception class or a "
                              "'module:Class' string")
        object.__setattr__(self, "retry_on", tuple(retry_on))

    def delay(self, attempt: int, seed: str = "") -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) before the next."""
        try:
            base = min(self.max_interval, self.initial_interval * self.backoff ** (attempt - 1))
        except OverflowError:
            base = self.max_interval
        if not self.jitter:
            return float(base)
        digest = hashlib.sha256(f"{seed}\x1f{attempt}".encode()).digest()
        return float(base) * (0.5 + 0.5 * int.from_bytes(digest[:8], "big") / 2**64)


@dataclass(frozen=True)
class PolicyContext:
    """The decision policy's view of an invocation.

    - ``step``: 0 for the first decision, +1 after each completed transition
      (a parallel transition counts as one).
    - ``state``: the agent state (sequential node results merged in).
    - ``input``: the invocation input.
    - ``last_result``: the last *sequential* node's result, or None.
    - ``parallel_results``: after a parallel transition, the branch results in
      the requested order; None otherwise (and at the start of an invocation).
    - ``invocation_id``.
    - ``resume_value``: the value given to ``resume()`` for the first decision
      after a pause (a ``hy.Pause`` or a breakpoint); None otherwise.
    - ``thread``: the conversation thread the invocation runs on
      (``run(input, thread=...)``), or None.
    """

    step: int
    state: Mapping[str, Any]
    input: Any
    last_result: Any
    parallel_results: list[Any] | None
    invocation_id: str
    resume_value: Any = None
    thread: str | None = None


@dataclass(frozen=True)
class NodeContext:
    """What a node function receives.

    - ``input``: the transition input; ``state``: a read-only snapshot.
    - ``node_id``, ``invocation_id``, ``execution_id`` (one transition),
      ``task_id`` (this node in this transition; stable across restarts).
    - ``idempotency_key``: stable across re-runs of the same task; pass it to
      external services so a repeated call is recognised.
    - ``streamer``: None unless the invocation streams; otherwise
      ``ctx.streamer({...})`` publishes a ``node_partial_result`` event.
    - ``item``: in a map step (:class:`Map`), the index of ``input`` in the
      step's items; None outside maps.
    - ``thread``: the invocation's conversation thread, or None.
    - ``attempt``: 1 for the first run of the task, +1 for each retry (and for
      each re-run of an idempotent task on recovery).
    """

    input: Any
    state: Mapping[str, Any]
    node_id: str
    invocation_id: str
    execution_id: str
    task_id: str
    idempotency_key: str
    streamer: Callable[[dict[str, Any]], None] | None = None
    item: int | None = None
    attempt: int = 1
    thread: str | None = None


@dataclass(frozen=True)
class Decision:
    """A validated policy answer: ``nodes`` to run (``parallel`` or not), or ``finish``.
    A map step (``map``) has one node, ``input`` the list of items and ``reduce``
    the reduce function's import path (or None)."""

    finish: bool
    result: Any = None
    nodes: tuple[str, ...] = ()
    input: Any = None
    parallel: bool = False
    map: bool = False
    reduce: str | None = None
    pause: bool = False
    """Pause with ``result`` as the payload."""


def _importable(path: str) -> str | None:
    """Default reduce check of :func:`validate_decision`: none (the caller checks)."""
    return None


def validate_decision(
    answer: Any, known_nodes: Collection[str],
    reduce_check: Callable[[str], str | None] = _importable,
) -> Decision | ErrorInfo:
    """Check a policy's answer; return a :class:`Decision` or the failure as data.

    Codes: ``invalid_policy_result`` (not Next/Finish, empty or malformed node
    list, an input or result that cannot be stored durably), ``unknown_node``,
    ``duplicate_node``. ``details['field']`` names what is wrong: ``answer``,
    ``node``, ``input`` or ``result`` (with ``details['key']``, the path of the
    unstorable part). A :class:`Map` is checked by :func:`validate_map`
    (``reduce_check(path)`` says why a reduce path cannot be imported, or None).
    """
    if isinstance(answer, Map):
        return validate_map(answer, known_nodes, reduce_check)
    if isinstance(answer, Finish):
        unstorable = _unstorable(answer.result, "result", "Finish")
        return unstorable or Decision(True, answer.result)
    if isinstance(answer, Pause):
        unstorable = _unstorable(answer.payload, "payload", "Pause")
        return unstorable or Decision(False, answer.payload, pause=True)
    if not isinstance(answer, Next):
        return ErrorInfo("invalid_policy_result",
                         f"the decision policy returned {type(answer).__name__}; "
                         "expected hy.Next(...), hy.Map(...), hy.Finish(...) or "
                         "hy.Pause(...) as its answer",
                         {"returned": type(answer).__name__, "field": "answer"})
    node: Any = answer.node
    if isinstance(node, str):
        nodes: tuple[str, ...] = (node,)
        parallel = False
    elif isinstance(node, (list, tuple)):
        if not node:
            return ErrorInfo("invalid_policy_result", "Next() got an empty list of nodes "
                             "(field node)", {"field": "node"})
        if not all(isinstance(n, str) for n in node):
            return ErrorInfo("invalid_policy_result", "Next() node ids must be strings "
                             "(field node)", {"field": "node"})
        nodes, parallel = tuple(node), True
        duplicates = sorted({n for n in nodes if nodes.count(n) > 1})
        if duplicates:
            return ErrorInfo("duplicate_node", f"parallel node list repeats {duplicates} "
                             "(field node)", {"nodes": _storable(duplicates),
                                              "field": "node"})
    else:
        return ErrorInfo("invalid_policy_result",
                         f"Next() node must be a node id or a list of ids, got "
                         f"{type(node).__name__} (field node)", {"field": "node"})
    unknown = [n for n in nodes if n not in known_nodes]
    if unknown:
        return ErrorInfo("unknown_node", f"unknown node id(s) {unknown} (field node)",
                         {"nodes": _storable(unknown), "field": "node"})
    unstorable = _unstorable(answer.input, "input", "Next")
    return unstorable or Decision(False, nodes=nodes, input=answer.input, parallel=parallel)


def validate_map(answer: Map, known_nodes: Collection[str],
                 reduce_check: Callable[[str], str | None] = _importable
                 ) -> Decision | ErrorInfo:
    """Check a :class:`Map` answer before any of its items runs.

    Codes: ``invalid_policy_result`` (node not a string, a reduce of the wrong
    kind, an item that cannot be stored: ``details['field']`` is ``items[i]``),
    ``unknown_node``, ``map_items_invalid`` (items not a non-empty list),
    ``reduce_not_importable`` (a lambda, closure or method, or a path that
    does not import)."""
    node: Any = answer.node
    if not isinstance(node, str):
        return ErrorInfo("invalid_policy_result", f"Map() node must be one node id, got "
                         f"{type(node).__name__} (field node)", {"field": "node"})
    if node not in known_nodes:
        return ErrorInfo("unknown_node", f"unknown node id(s) {[node]} (field node)",
                         {"nodes": _storable([node]), "field": "node"})
    items: Any = answer.items
    if not isinstance(items, list) or not items:
        got = "an empty list" if isinstance(items, list) else type(items).__name__
        return ErrorInfo("map_items_invalid", f"Map() items must be a non-empty list, got "
                         f"{got} (field items); pass a list with one entry per run of "
                         f"node {node!r}, or answer hy.Next/hy.Finish instead",
                         {"field": "items", "returned": type(items).__name__})
    reduce = _reduce_path(answer.reduce, reduce_check)
    if isinstance(reduce, ErrorInfo):
        return reduce
    for index, item in enumerate(items):
        unstorable = _unstorable(item, f"items[{index}]", "Map")
        if unstorable is not None:
            return unstorable
    return Decision(False, nodes=(node,), input=items, map=True, reduce=reduce)


def _reduce_path(value: Any, reduce_check: Callable[[str], str | None]
                 ) -> str | ErrorInfo | None:
    if value is None:
        return None
    if callable(value) and not isinstance(value, str):
        path = function_path(value)
        if path.startswith("!"):
            return ErrorInfo("reduce_not_importable", f"Map() reduce {path[1:]} (field "
                             "reduce)", {"field": "reduce"})
        value = path
    if not isinstance(value, str):
        return ErrorInfo("invalid_policy_result", "Map() reduce must be None, a module-level "
                         "function or a 'package.module:function' string, got "
                         f"{type(value).__name__} (field reduce)", {"field": "reduce"})
    module, sep, attr = value.partition(":")
    why = None if sep and module and attr and not module.startswith(".") else (
        "it is not 'package.module:function'")
    why = why or reduce_check(value)
    if why is not None:
        return ErrorInfo("reduce_not_importable", f"Map() reduce {value!r} cannot be used: "
                         f"{why} (field reduce); give an importable module-level function "
                         "as 'package.module:function'", {"field": "reduce", "reduce": value})
    return value


def function_path(value: Any) -> str:
    """``module:qualname`` of a module-level function, or ``"!why"`` if it is a lambda,
    closure, nested function or method (which cannot be imported again by name)."""
    name: str | None = getattr(value, "__qualname__", None)
    module: str | None = getattr(value, "__module__", None)
    if inspect.ismethod(value):
        return f"!is bound method {name}: it cannot be imported by name"
    if name == "<lambda>":
        return "!is a lambda: it cannot be imported by name"
    if name is None or module is None or "<locals>" in name \
            or getattr(value, "__closure__", None) or not inspect.isfunction(value):
        return f"!{name or value!r} is not a module-level function: it cannot be imported " \
               "by name"
    return f"{module}:{name}"


def _storable(ids: list[str]) -> list[str]:
    """Node ids as text the store can hold (a lone surrogate is escaped): the
    error is recorded with the invocation."""
    return [n.encode("utf-8", "backslashreplace").decode("utf-8") for n in ids]


def _unstorable(value: Any, field: str, answer: str) -> ErrorInfo | None:
    """The error for a value the store cannot hold (it is checkpointed), or None."""
    try:
        check_encodable(value, field)
    except EncodingError as exc:
        return ErrorInfo("invalid_policy_result", f"{answer} {field} cannot be stored: {exc}",
                         {**exc.details, "field": field})
    return None
