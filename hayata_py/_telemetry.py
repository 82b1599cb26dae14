"""Lifecycle telemetry in the style of Erlang's ``:telemetry``.

An event is a tuple of strings, e.g. ``("hayata", "node", "execution", "stop")``.
:func:`execute` calls every handler attached to that exact event, synchronously
and in the calling process, as ``handler(event, measurements, metadata, config)``.

Handlers run in the actor processes where events happen, so handlers registered
when a system starts travel by environment (:data:`ENV_VAR`, built by
:func:`env_value`) and are attached in each process on its first event
(:func:`install_from_env`). A handler that raises (or cannot be imported) is
detached and logged; it never breaks the runtime.

Spans: :func:`span_start` emits ``prefix + ("start",)`` with ``system_time``
(``time.time_ns()``) and returns a picklable :class:`Span`; :func:`span_stop`
and :func:`span_exception` emit the terminal event with ``duration`` in
nanoseconds from ``time.monotonic_ns()`` (one clock for every process of a host,
so a span may start in one actor and end in another).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from hayata_py._callables import callable_path, resolve_callable
from hayata_py._errors import ConfigError, HayataError

Event = tuple[str, ...]
HandlerFunction = Callable[[Event, dict[str, Any], dict[str, Any], Any], None]

ENV_VAR = "HAYATA_TELEMETRY_HANDLERS"

AGENT_INVOCATION: Event = ("hayata", "agent", "invocation")
NODE_EXECUTION: Event = ("hayata", "node", "execution")
EDGE: Event = ("hayata", "edge")
REDUCER: Event = ("hayata", "reducer")
NODE_RETRY: Event = ("hayata", "node", "retry")
"""A node's attempt failed and it will be tried again (``measurements["delay"]``)."""
AUTO_RECOVERY: Event = ("hayata", "agent", "auto_recovery")
"""An agent with ``auto_recover`` started: ``measurements`` count the unfinished
invocations it recovered and those left waiting; ``metadata`` lists their ids
(``recovered``, ``waiting``)."""

CACHE: Event = ("hayata", "cache")
"""A task of a node with a cache policy was looked up in its cache: ``("hayata",
"cache", "hit")`` (it completes from the store, its node does not run) or
``("hayata", "cache", "miss")``; ``measurements`` ``{"count": 1}``, ``metadata``
``agent_id``, ``node_id``, ``invocation_id``, ``task_id``."""
CIRCUIT_OPENED: Event = ("hayata", "circuit", "opened")
"""A node's circuit breaker opened (``measurements``: ``failures``, ``cool_down``;
``metadata``: ``agent_id``, ``node_id``)."""
CIRCUIT_CLOSED: Event = ("hayata", "circuit", "closed")
"""A node's circuit breaker closed: its probe succeeded (the same keys)."""

EVENTS: frozenset[Event] = frozenset(
    [(*prefix, suffix) for prefix in (AGENT_INVOCATION, NODE_EXECUTION, EDGE)
     for suffix in ("start", "stop", "exception")]
    + [(*REDUCER, "start"), (*REDUCER, "stop"), NODE_RETRY, AUTO_RECOVERY,
       (*CACHE, "hit"), (*CACHE, "miss"),
       CIRCUIT_OPENED, CIRCUIT_CLOSED]
)
"""Every event the runtime emits."""

TASK_EVENTS: frozenset[Event] = frozenset(
    [(*prefix, suffix) for prefix in (NODE_EXECUTION, EDGE, REDUCER)
     for suffix in ("start", "stop")] + [(*CACHE, "hit"), (*CACHE, "miss")])
"""The events of every task (several per step)."""

QUIET_EVENTS: frozenset[Event] = TASK_EVENTS | {(*AGENT_INVOCATION, "start"),
                                                (*AGENT_INVOCATION, "stop")}
"""What the built-in log handler logs at ``debug`` level, except a ``stop``
whose status is not ``completed`` (a failed, cancelled, timed-out or paused
one), which it logs at ``info``: every task's events, and an invocation's
start and completed stop, which the agent's own ``invocation_started`` and
``invocation_ended`` lines (with ``duration_ms``) already say at ``info``."""

STATUSES = ("completed", "failed", "cancelled", "timed_out")
"""Values of the ``status`` metadata key on terminal events."""


@dataclass(frozen=True)
class HandlerInfo:
    """An attached handler: its id, events, function (or import path) and config."""

    id: str
    events: tuple[Event, ...]
    function: HandlerFunction | str
    config: Any = None


_lock = threading.Lock()
_handlers: dict[str, HandlerInfo] = {}
_index: dict[Event, tuple[HandlerInfo, ...]] = {}
_installed_pid: int | None = None


_bound: tuple[int, Any, Any] | None = None  # (pid, structlog config, its bound logger)


def _log() -> Any:
    """This process's telemetry logger, bound once per structlog configuration
    (a lazy ``get_logger`` proxy would bind anew on every line)."""
    global _bound
    config = structlog.get_config()
    key = (config["processors"], config["logger_factory"], config["wrapper_class"])
    cached = _bound
    if cached is None or cached[0] != os.getpid() \
            or any(a is not b for a, b in zip(cached[1], key, strict=True)):
        cached = _bound = (os.getpid(), key, structlog.get_logger("hayata.telemetry").bind())
    return cached[2]


def _reindex() -> None:
    global _index
    index: dict[Event, list[HandlerInfo]] = {}
    for info in _handlers.values():
        for event in info.events:
            index.setdefault(event, []).append(info)
    _index = {event: tuple(infos) for event, infos in index.items()}


def _check_event(event: Any, field_name: str) -> Event:
    if not isinstance(event, (tuple, list)) or not event \
            or not all(isinstance(part, str) and part for part in event):
        raise ConfigError(field_name, f"an event is a non-empty tuple of strings, got {event!r}")
    return tuple(event)


def attach(handler_id: str, events: Iterable[Event], handler: HandlerFunction | str,
           config: Any = None) -> None:
    """Call ``handler(event, measurements, metadata, config)`` on each of ``events``.

    ``handler`` is a function or a ``"pkg.mod:func"`` path (imported on the
    first event). Raises :class:`ConfigError` for a malformed argument and
    :class:`HayataError` (``handler_exists``) if ``handler_id`` is attached.
    """
    if not isinstance(handler_id, str) or not handler_id:
        raise ConfigError("handler_id", f"must be a non-empty string, got {handler_id!r}")
    checked = tuple(_check_event(e, f"events of {handler_id!r}") for e in events)
    if not checked:
        raise ConfigError(f"events of {handler_id!r}", "must name at least one event")
    if isinstance(handler, str):
        module, sep, attr = handler.partition(":")
        if not (module and sep and attr):
            raise ConfigError(handler_id, f"{handler!r} is not 'package.module:function'")
    elif not callable(handler):
        raise ConfigError(handler_id, f"expected a function or path, got {type(handler).__name__}")
    with _lock:
        if handler_id in _handlers:
            raise HayataError(f"telemetry handler {handler_id!r} is already attached",
                              code="handler_exists", handler_id=handler_id)
        _handlers[handler_id] = HandlerInfo(handler_id, checked, handler, config)
        _reindex()


def detach(handler_id: str) -> bool:
    """Detach a handler; True if it was attached."""
    with _lock:
        found = _handlers.pop(handler_id, None) is not None
        if found:
            _reindex()
    return found


def list_handlers(prefix: Event = ()) -> list[HandlerInfo]:
    """Attached handlers with at least one event starting with ``prefix``."""
    return [info for info in _handlers.values()
            if any(event[:len(prefix)] == prefix for event in info.events)]


def execute(event: Event, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
    """Run every handler attached to ``event`` (in attach order); never raises."""
    if _installed_pid != os.getpid():
        install_from_env()
    handlers = _index.get(event)
    if not handlers:
        return
    for info in handlers:
        try:
            function = (resolve_callable(info.function) if isinstance(info.function, str)
                        else info.function)
            function(event, dict(measurements), dict(metadata), info.config)
        except Exception as exc:  # noqa: BLE001 - a handler must never break the runtime
            detach(info.id)
            _log().error("telemetry_handler_detached", handler_id=info.id,
                         telemetry_event=".".join(event), error_class=type(exc).__name__,
                         error=str(exc))


# -- spans -------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A started span: its event prefix, metadata and monotonic start (ns). Picklable."""

    prefix: Event
    metadata: dict[str, Any] = field(default_factory=dict)
    started: int = 0


def span_start(prefix: Event, metadata: Mapping[str, Any],
               measurements: Mapping[str, Any] | None = None) -> Span:
    """Emit ``prefix + ("start",)`` with ``system_time``; return the :class:`Span`."""
    span = Span(tuple(prefix), dict(metadata), time.monotonic_ns())
    execute((*span.prefix, "start"),
            {"system_time": time.time_ns(), **(measurements or {})}, span.metadata)
    return span


def span_stop(span: Span, status: str = "completed",
              metadata: Mapping[str, Any] | None = None,
              measurements: Mapping[str, Any] | None = None) -> None:
    """Emit ``prefix + ("stop",)`` with ``duration`` and ``status``."""
    execute((*span.prefix, "stop"),
            {"duration": time.monotonic_ns() - span.started, **(measurements or {})},
            {**span.metadata, "status": status, **(metadata or {})})


def span_exception(span: Span, error: BaseException | type[BaseException] | str,
                   status: str = "failed", metadata: Mapping[str, Any] | None = None) -> None:
    """Emit ``prefix + ("exception",)`` with ``duration``, ``status`` and ``class``
    (the exception's class name only: never its message or traceback)."""
    if isinstance(error, str):
        name = error
    elif isinstance(error, type):
        name = error.__name__
    else:
        name = type(error).__name__
    execute((*span.prefix, "exception"),
            {"duration": time.monotonic_ns() - span.started},
            {**span.metadata, "status": status, "class": name, **(metadata or {})})


# -- handlers registered at system start --------------------------------------------


def env_value(handlers: Mapping[str, tuple[Any, Iterable[Event]]]) -> str:
    """The :data:`ENV_VAR` value for ``{handler_id: ("pkg.mod:func", [event, ...])}``.

    Each function must be importable by path and each event one of
    :data:`EVENTS`; raises :class:`ConfigError` naming the handler otherwise.
    """
    if not isinstance(handlers, Mapping):
        raise ConfigError("telemetry_handlers", "must be a dict of handler id -> "
                                                "('pkg.mod:func', [event, ...])")
    value: dict[str, Any] = {}
    for handler_id, entry in handlers.items():
        name = f"telemetry_handlers[{handler_id!r}]"
        if not isinstance(handler_id, str) or not handler_id:
            raise ConfigError(name, "handler ids must be non-empty strings")
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise ConfigError(name, f"expected ('pkg.mod:func', [event, ...]), got {entry!r}")
        path = callable_path(entry[0], name)
        events = [_check_event(e, name) for e in entry[1]]
        if not events:
            raise ConfigError(name, "must name at least one event")
        unknown = [e for e in events if e not in EVENTS]
        if unknown:
            raise ConfigError(name, f"unknown event {unknown[0]!r}; known events: "
                                    f"{sorted(EVENTS)}")
        value[handler_id] = [path, [list(e) for e in events]]
    return json.dumps(value, sort_keys=True)


def install_from_env(force: bool = False) -> list[str]:
    """Attach the handlers named in :data:`ENV_VAR` (once per process unless ``force``).

    Handlers already attached under the same id (inherited through ``fork``)
    are kept. A malformed value is logged and ignored. Returns the ids attached.
    """
    global _installed_pid
    if _installed_pid == os.getpid() and not force:
        return []
    _installed_pid = os.getpid()
    raw = os.environ.get(ENV_VAR)
    if not raw:
        return []
    attached = []
    try:
        spec = json.loads(raw)
        for handler_id, (path, events) in spec.items():
            if handler_id in _handlers:
                continue
            attach(handler_id, [tuple(e) for e in events], str(path))
            attached.append(handler_id)
    except (ValueError, TypeError, AttributeError, HayataError) as exc:
        _log().error("telemetry_env_invalid", env_var=ENV_VAR, error_class=type(exc).__name__,
                     error=str(exc))
    return attached


def log_event(event: Event, measurements: dict[str, Any], metadata: dict[str, Any],
              config: Any) -> None:
    """The built-in handler: one structlog line per event, named ``"hayata.node..."``,
    with the measurements and metadata as fields; at ``debug`` level for a task's
    or an invocation's start and successful stop (:data:`QUIET_EVENTS`), so at
    the default ``info`` level no line is built for them, at ``info`` for
    everything else."""
    log = _log()
    if event in QUIET_EVENTS and metadata.get("status", "completed") == "completed":
        enabled = getattr(log, "is_enabled_for", None)
        if enabled is not None and not enabled(logging.DEBUG):
            return
        method = log.debug
    else:
        method = log.info
    fields = {**measurements, **metadata}
    if "event" in fields:
        fields["event_"] = fields.pop("event")
    method(".".join(event), **fields)
