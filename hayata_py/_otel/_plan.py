"""Which OpenTelemetry span a lifecycle telemetry event becomes: pure functions.

No OpenTelemetry import here: :func:`plan_span` turns one terminal event
(``stop`` or ``exception``) and its metadata into a :class:`SpanPlan` (ids,
parent, name, attributes, status, times) that ``_handler`` hands to the SDK.

Ids are derived from the ids the metadata carries, so every process computes
the same ones without talking to the others:

- trace id: 128 bits of SHA-256 of the invocation id (:func:`trace_id_for`);
  in ``"parent"`` caller mode with a caller ``traceparent``, the caller's trace.
- a span id: 64 bits of SHA-256 over the span's level and identity, where the
  identity of a node-level span is its :data:`NODE_KEYS` plus whichever
  :data:`DISCRIMINATORS` its metadata has (``attempt``, ``item``: each value
  its own span), and an edge adds ``edge_id``. An edge or reducer names its
  parent by the same identity, so it finds its node's span from another
  process, whichever of the two is exported first.

Every scalar metadata value becomes an attribute ``hayata.<key>`` (``class``
becomes ``error.type``), so a key the runtime adds later is exported without a
change here; keys that could carry user data (:data:`HIDDEN_KEYS`) never are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

AttributeValue = str | bool | int | float | tuple[str, ...] | tuple[int, ...] \
    | tuple[float, ...] | tuple[bool, ...]
CallerMode = Literal["link", "parent"]
StartKey = tuple[str, str, bool, tuple[tuple[str, str], ...]]
CALLER_MODES: tuple[CallerMode, ...] = ("link", "parent")

INVOCATION, NODE, EDGE, REDUCER = "invocation", "node", "edge", "reducer"

LEVELS: dict[tuple[str, ...], str] = {
    ("hayata", "agent", "invocation"): INVOCATION,
    ("hayata", "node", "execution"): NODE,
    ("hayata", "edge"): EDGE,
    ("hayata", "reducer"): REDUCER,
}
"""Event prefix -> level. An event whose prefix is not here makes no span."""

PARENTS: dict[str, str | None] = {INVOCATION: None, NODE: INVOCATION, EDGE: NODE,
                                  REDUCER: NODE}
NAMES: dict[str, str] = {INVOCATION: "invoke_agent {agent_id}", NODE: "node {node_id}",
                         EDGE: "edge {node_id}", REDUCER: "reduce {node_id}"}
"""Span names: low-cardinality (agent and node ids come from the configuration)."""

NODE_KEYS = ("execution_id", "node_id")
"""What identifies a node execution (and, with :data:`EDGE_KEYS`, its edge)."""
DISCRIMINATORS = ("attempt", "item")
"""Keys that, when present, make one node execution several spans (one per
retry attempt, one per map item). The runtime must put the same values on a
node execution's events and on its edges' events."""
EDGE_KEYS = ("edge_id",)

HIDDEN_KEYS = frozenset({"input", "inputs", "output", "result", "results", "message",
                         "messages", "error", "traceback", "state", "data",
                         "traceparent", "tracestate"})
"""Never exported as attributes (user data, or trace context used for ids)."""
ERROR_STATUSES = frozenset({"failed", "timed_out"})

@dataclass(frozen=True)
class CallerSpan:
    """A caller's span context (from a W3C ``traceparent``)."""

    trace_id: int
    span_id: int
    sampled: bool


@dataclass(frozen=True)
class SpanPlan:
    """Everything needed to create one finished span.

    ``span_id`` None lets the SDK choose one (a span nothing can refer to).
    ``parent_span_id`` None makes a root; ``parent_is_caller`` says that parent
    is the caller's span (carry its trace state); ``sampled`` is the parent's
    sampled flag when known (a caller's), None when the local sampler must
    decide as it did for the invocation's root span (``root_name``).
    """

    name: str
    level: str
    trace_id: int
    span_id: int | None
    parent_span_id: int | None
    parent_is_caller: bool
    sampled: bool | None
    root_name: str
    link_caller: bool
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: str | None = None
    exception_type: str | None = None


def invocation_of(metadata: Mapping[str, Any]) -> str | None:
    """The invocation id of an event: ``invocation_id``, else the part of
    ``execution_id`` before its last ``:`` (the runtime's ``"<invocation>:<step>"``
    ids, for node and edge events that do not carry ``invocation_id`` yet)."""
    value = metadata.get("invocation_id")
    if isinstance(value, str) and value:
        return value
    execution = metadata.get("execution_id")
    if isinstance(execution, str) and ":" in execution:
        head = execution.rpartition(":")[0]
        return head or None
    return None


@lru_cache(maxsize=1024)
def trace_id_for(invocation_id: str) -> int:
    """The trace id of an invocation (never 0: a valid W3C trace id).

    A hash, not the invocation id itself: a uuid4's low 64 bits always start
    with its variant bits ``10``, and ratio samplers decide on those bits."""
    digest = hashlib.sha256(b"hayata-trace\x1f" + invocation_id.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1


def span_id_for(level: str, invocation_id: str, identity: Mapping[str, Any]) -> int:
    """The span id of a span at ``level`` with ``identity`` (never 0)."""
    return _span_id(level, invocation_id, _items(identity))


@lru_cache(maxsize=4096)  # a span's id is computed by itself, its children and its parent
def _span_id(level: str, invocation_id: str, items: tuple[tuple[str, str], ...]) -> int:
    parts = [level, invocation_id, *(p for item in items for p in item)]
    raw = "".join(f"{len(p)}:{p}" for p in parts)  # length-prefixed: unambiguous
    digest = hashlib.sha256(raw.encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def _items(identity: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in identity.items()))


def identity(level: str, metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The keys that identify a span at ``level`` (None: it cannot be named)."""
    if level == INVOCATION:
        return {}
    out: dict[str, Any] = {}
    for key in NODE_KEYS + EDGE_KEYS if level == EDGE else NODE_KEYS:
        value = metadata.get(key)
        if not _scalar(value):
            return None
        out[key] = value
    for key in DISCRIMINATORS:
        value = metadata.get(key)
        if _scalar(value):
            out[key] = value
    return out


def attributes(metadata: Mapping[str, Any], invocation_id: str) -> dict[str, AttributeValue]:
    """``hayata.<key>`` for each exportable metadata value; ``class`` as ``error.type``."""
    out: dict[str, AttributeValue] = {"hayata.invocation_id": invocation_id}
    for key, value in metadata.items():
        if not isinstance(key, str) or key in HIDDEN_KEYS:
            continue
        converted = _attribute(value)
        if converted is not None:
            out["error.type" if key == "class" else f"hayata.{key}"] = converted
    return out


def start_key(event: tuple[str, ...], metadata: Mapping[str, Any]) -> StartKey | None:
    """What pairs a span's ``start`` event with its terminal event in one process
    (None when the event names no invocation)."""
    level = LEVELS.get(tuple(event[:-1]))
    invocation_id = invocation_of(metadata)
    if level is None or invocation_id is None:
        return None
    return (level, invocation_id, bool(metadata.get("recovered")),
            _items(identity(level, metadata) or {}))


def plan_span(event: tuple[str, ...], measurements: Mapping[str, Any],
              metadata: Mapping[str, Any], now_ns: int, started_ns: int | None = None,
              caller: CallerSpan | None = None, mode: CallerMode = "link") -> SpanPlan | None:
    """The span for a ``stop`` or ``exception`` event (None for any other event,
    or one that names no invocation).

    It starts at ``started_ns`` (the ``system_time`` of its start event, when
    this process saw it) and lasts ``duration``; otherwise it ends at
    ``now_ns``, when the handler runs."""
    level = LEVELS.get(tuple(event[:-1]))
    if level is None or event[-1] not in ("stop", "exception"):
        return None
    invocation_id = invocation_of(metadata)
    if invocation_id is None:
        return None
    duration = measurements.get("duration")
    duration = duration if isinstance(duration, int) and duration > 0 else 0
    joined = caller is not None and mode == "parent"
    trace_id = caller.trace_id if joined and caller is not None else trace_id_for(invocation_id)
    sampled = caller.sampled if joined and caller is not None else None
    attrs = attributes(metadata, invocation_id)
    agent = str(metadata.get("agent_id", ""))
    if level == INVOCATION:
        attrs["gen_ai.operation.name"] = "invoke_agent"
        attrs["gen_ai.agent.name"] = agent
    own = identity(level, metadata)
    parent: int | None
    span_id: int | None = None if own is None else span_id_for(level, invocation_id, own)
    root_id = span_id_for(INVOCATION, invocation_id, {})
    parent_is_caller = False
    if level == INVOCATION:
        if metadata.get("recovered"):
            # A recovered run: a span of its own under the invocation's first
            # run (which a crash may have kept from being exported).
            span_id, parent = None, root_id
        else:
            parent = caller.span_id if joined and caller is not None else None
            parent_is_caller = parent is not None
    else:
        parent_level = PARENTS[level]
        named = identity(parent_level, metadata) if parent_level else None
        parent = root_id if parent_level == INVOCATION or named is None \
            else span_id_for(str(parent_level), invocation_id, named)
    status = metadata.get("status")
    failed = event[-1] == "exception" or status in ERROR_STATUSES
    error_type = metadata.get("class") or metadata.get("error_code") or status
    if failed:
        attrs.setdefault("error.type", str(error_type or "failed"))
    return SpanPlan(
        name=NAMES[level].format(agent_id=agent, node_id=metadata.get("node_id", "")),
        level=level, trace_id=trace_id, span_id=span_id, parent_span_id=parent,
        parent_is_caller=parent_is_caller, sampled=sampled,
        root_name=NAMES[INVOCATION].format(agent_id=agent),
        link_caller=caller is not None and level == INVOCATION and not parent_is_caller,
        start_ns=started_ns if started_ns is not None else now_ns - duration,
        end_ns=started_ns + duration if started_ns is not None else now_ns, attributes=attrs,
        error=str(metadata.get("error_code") or error_type or "failed") if failed else None,
        exception_type=str(metadata["class"]) if event[-1] == "exception"
        and metadata.get("class") else None)


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool) and value != ""


def _attribute(value: Any) -> AttributeValue | None:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and value:
        for kind in (str, bool, int, float):
            if all(type(v) is kind for v in value):
                return tuple(value)
        return None
    if isinstance(value, (list, tuple)):
        return ()
    return None
