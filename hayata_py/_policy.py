"""What a decision policy sees and answers, and the pure checks on its answer."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from hayata_py._codec import check_encodable
from hayata_py._errors import EncodingError, ErrorInfo


@dataclass(frozen=True)
class Next:
    """Run ``node`` (a node id) with ``input``; or, with a list of distinct ids,
    run them in parallel, all with the same input and state snapshot."""

    node: str | list[str] | tuple[str, ...]
    input: Any = None


@dataclass(frozen=True)
class Finish:
    """End the invocation successfully with ``result``."""

    result: Any = None


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
    """

    step: int
    state: Mapping[str, Any]
    input: Any
    last_result: Any
    parallel_results: list[Any] | None
    invocation_id: str


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
    """

    input: Any
    state: Mapping[str, Any]
    node_id: str
    invocation_id: str
    execution_id: str
    task_id: str
    idempotency_key: str
    streamer: Callable[[dict[str, Any]], None] | None = None


@dataclass(frozen=True)
class Decision:
    """A validated policy answer: ``nodes`` to run (``parallel`` or not), or ``finish``."""

    finish: bool
    result: Any = None
    nodes: tuple[str, ...] = ()
    input: Any = None
    parallel: bool = False


def validate_decision(
    answer: Any, known_nodes: Collection[str]
) -> Decision | ErrorInfo:
    """Check a policy's answer; return a :class:`Decision` or the failure as data.

    Codes: ``invalid_policy_result`` (not Next/Finish, empty or malformed node
    list, an input or result that cannot be stored durably), ``unknown_node``,
    ``duplicate_node``. ``details['field']`` names what is wrong: ``answer``,
    ``node``, ``input`` or ``result`` (with ``details['key']``, the path of the
    unstorable part).
    """
    if isinstance(answer, Finish):
        unstorable = _unstorable(answer.result, "result", "Finish")
        return unstorable or Decision(True, answer.result)
    if not isinstance(answer, Next):
        return ErrorInfo("invalid_policy_result",
                         f"the decision policy returned {type(answer).__name__}; "
                         "expected hy.Next(...) or hy.Finish(...) as its answer",
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
                             "(field node)", {"nodes": duplicates, "field": "node"})
    else:
        return ErrorInfo("invalid_policy_result",
                         f"Next() node must be a node id or a list of ids, got "
                         f"{type(node).__name__} (field node)", {"field": "node"})
    unknown = [n for n in nodes if n not in known_nodes]
    if unknown:
        return ErrorInfo("unknown_node", f"unknown node id(s) {unknown} (field node)",
                         {"nodes": unknown, "field": "node"})
    unstorable = _unstorable(answer.input, "input", "Next")
    return unstorable or Decision(False, nodes=nodes, input=answer.input, parallel=parallel)


def _unstorable(value: Any, field: str, answer: str) -> ErrorInfo | None:
    """The error for a value the store cannot hold (it is checkpointed), or None."""
    try:
        check_encodable(value, field)
    except EncodingError as exc:
        return ErrorInfo("invalid_policy_result", f"{answer} {field} cannot be stored: {exc}",
                         {**exc.details, "field": field})
    return None
