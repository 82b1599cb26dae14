"""The telemetry handler that exports hayata_py's lifecycle events as OpenTelemetry spans.

It runs in every actor process (``AgentSystem(telemetry_handlers=handlers(...))``
registers it by import path). On the first event in a process it reads the
options :func:`handlers` put in :data:`OPTIONS_ENV_VAR`, calls the ``setup``
function once to get that process's ``TracerProvider``, and from then on makes
each ``stop``/``exception`` event one finished span, with the ids, parent and
times :func:`hayata_py._otel._plan.plan_span` derives: a span may start in one
process and end in another, and a child may be exported before its parent.

The SDK picks span ids with its ``IdGenerator``; this tracer's generator is
wrapped so it returns the derived id while a span is being created (a context
variable says which), and the SDK's own generator otherwise.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import multiprocessing
import multiprocessing.util
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import psutil
import structlog
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from hayata_py._callables import callable_path, resolve_callable
from hayata_py._errors import ConfigError
from hayata_py._otel._plan import (
    CALLER_MODES,
    LEVELS,
    CallerMode,
    CallerSpan,
    SpanPlan,
    StartKey,
    plan_span,
    start_key,
)
from hayata_py._telemetry import EVENTS, Event

HANDLER_ID = "hayata.otel"
HANDLER_PATH = "hayata_py.otel:handle"
OPTIONS_ENV_VAR = "HAYATA_OTEL_OPTIONS"
"""The options of :func:`handlers`, as JSON, inherited by every actor process."""
TRACER_NAME = "hayata_py"

SPAN_EVENTS: tuple[Event, ...] = tuple(sorted(e for e in EVENTS if e[:-1] in LEVELS))
"""The events the handler needs: each span is made when its work ends (``stop``
or ``exception``), with the start time its ``start`` event gave, if any."""
EXIT_FLUSH_SECONDS = 2.0
"""How long an exiting actor process waits for its batched spans to be exported."""
EXIT_PRIORITY = 10
STARTS_KEPT = 4096
"""Start times kept per process for spans still running (oldest dropped first)."""

_W3C = TraceContextTextMapPropagator()


@dataclass(frozen=True)
class Options:
    """What :func:`handlers` was given (see its docstring)."""

    setup: str | None = None
    caller_context: CallerMode = "link"


def handlers(*, setup: str | Callable[[], Any] | None = None,
             caller_context: str = "link", **unknown: Any
             ) -> dict[str, tuple[str, list[Event]]]:
    """The ``telemetry_handlers`` mapping that exports spans from every actor process.

    - ``setup``: ``"pkg.mod:function"`` (or that module-level function),
      called once in each actor process before its first span. It installs
      the exporter: it returns a ``TracerProvider`` (or sets the global one
      and returns None). Without it, the global provider is used: the one the
      starting process installed before the system started (forked actors
      inherit it), or none (spans are dropped).
    - ``caller_context``: what a caller's ``traceparent`` in the run's
      metadata does: ``"link"`` (default) links the invocation's span to the
      caller's span and keeps one trace per invocation (its trace id is
      :func:`trace_id_for` of the invocation id); ``"parent"`` makes the
      invocation a child of the caller's span, in the caller's trace (this
      needs ``traceparent`` on the events of every node and edge of the
      invocation, not only on the agent's).

    Raises :class:`ConfigError` naming the option when ``setup`` cannot be
    imported or an option is unknown; nothing is changed then. Otherwise the
    options are put in ``$HAYATA_OTEL_OPTIONS`` for the actor processes the
    system will start (one set of options per process: OpenTelemetry has one
    provider per process too).
    """
    if unknown:
        name = sorted(unknown)[0]
        raise ConfigError(name, "unknown option of hayata_py.otel.handlers(); "
                                "known options: setup, caller_context")
    path = None if setup is None else callable_path(setup, "setup")
    if caller_context not in CALLER_MODES:
        raise ConfigError("caller_context", f"must be one of {list(CALLER_MODES)}, "
                                            f"got {caller_context!r}")
    os.environ[OPTIONS_ENV_VAR] = json.dumps({"setup": path, "caller_context": caller_context})
    return {HANDLER_ID: (HANDLER_PATH, list(SPAN_EVENTS))}


def trace_context() -> dict[str, str]:
    """The current span's W3C trace context (``traceparent``, ``tracestate``):
    what a caller passes to a run so its spans link to (or nest in) the caller's."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}


# -- per process ----------------------------------------------------------------------

_chosen: ContextVar[tuple[int | None, int | None]] = ContextVar(
    "hayata_otel_chosen_ids", default=(None, None))


class _ChosenIds(IdGenerator):
    """The SDK's generator, except while :data:`_chosen` names the ids to use."""

    def __init__(self, fallback: IdGenerator) -> None:
        self.fallback = fallback

    def generate_span_id(self) -> int:
        span_id = _chosen.get()[1]
        return span_id if span_id is not None else self.fallback.generate_span_id()

    def generate_trace_id(self) -> int:
        trace_id = _chosen.get()[0]
        return trace_id if trace_id is not None else self.fallback.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        if _chosen.get()[0] is not None:
            return False  # derived from ids: random only as far as they are
        check = getattr(self.fallback, "is_trace_id_random", None)
        return bool(check()) if callable(check) else False


@dataclass
class _Process:
    pid: int
    options: Options
    tracer: SdkTracer | None


_lock = threading.RLock()  # re-entrant: a setup may emit events itself
_process: _Process | None = None
_starts: OrderedDict[StartKey, int] = OrderedDict()
_starts_pid = os.getpid()


def _starts_here() -> OrderedDict[StartKey, int]:
    """This process's start times (a forked child drops its parent's); hold _lock."""
    global _starts_pid
    if _starts_pid != os.getpid():
        _starts.clear()
        _starts_pid = os.getpid()
    return _starts


def _log() -> Any:
    return structlog.get_logger("hayata.otel")


def read_options() -> Options:
    """The options in :data:`OPTIONS_ENV_VAR` (defaults when unset)."""
    raw = os.environ.get(OPTIONS_ENV_VAR)
    if not raw:
        return Options()
    value = json.loads(raw)
    mode = value.get("caller_context", "link")
    if mode not in CALLER_MODES:
        raise ConfigError("caller_context", f"{mode!r} in ${OPTIONS_ENV_VAR}")
    setup = value.get("setup")
    return Options(str(setup) if setup else None, mode)


def _start() -> _Process:
    options = read_options()
    provider: Any = None
    if options.setup is not None:
        provider = resolve_callable(options.setup)()
        if provider is not None and not isinstance(provider, trace.TracerProvider):
            raise ConfigError("setup", f"{options.setup} returned {type(provider).__name__}; "
                                       "return a TracerProvider, or None after setting the "
                                       "global one")
    if provider is None:
        provider = trace.get_tracer_provider()
    tracer = provider.get_tracer(TRACER_NAME, _version())
    if not isinstance(tracer, SdkTracer):
        _log().warning("otel_no_sdk_tracer_provider", provider=type(provider).__name__,
                       hint="pass hayata_py.otel.handlers(setup='pkg.mod:setup') returning "
                            "an opentelemetry.sdk.trace.TracerProvider; spans are dropped")
        return _Process(os.getpid(), options, None)
    if not isinstance(tracer.id_generator, _ChosenIds):
        tracer.id_generator = _ChosenIds(tracer.id_generator)
    if multiprocessing.parent_process() is not None:
        # Actor processes end through multiprocessing, which skips atexit (where
        # the SDK flushes): flush batched spans from its exit finalizers instead.
        multiprocessing.util.Finalize(None, _flush, (provider,), exitpriority=EXIT_PRIORITY)
    return _Process(os.getpid(), options, tracer)


def _flush(provider: Any) -> None:
    """At a process's exit: let its child processes (edges, reducers) exit first,
    since they die with it (PDEATHSIG) and may still be exporting, then export
    this process's batched spans; each for at most :data:`EXIT_FLUSH_SECONDS`."""
    with contextlib.suppress(psutil.Error):  # no children left to wait for
        psutil.wait_procs(psutil.Process().children(), timeout=EXIT_FLUSH_SECONDS)
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        flush(int(EXIT_FLUSH_SECONDS * 1000))


def _version() -> str | None:
    try:
        return importlib.metadata.version("hayata_py")
    except importlib.metadata.PackageNotFoundError:
        return None


def _current() -> _Process:
    global _process
    process = _process
    if process is not None and process.pid == os.getpid():
        return process
    with _lock:
        if _process is None or _process.pid != os.getpid():
            _process = _start()  # a forked child sets up its own exporter
        return _process


def reset() -> None:
    """Forget this process's setup (the next event runs ``setup`` again)."""
    global _process
    with _lock:
        _process = None
        _starts.clear()


# -- the handler ----------------------------------------------------------------------


def handle(event: Event, measurements: dict[str, Any], metadata: dict[str, Any],
           config: Any) -> None:
    """The telemetry handler: one finished span per ``stop``/``exception`` event."""
    now = time.time_ns()  # the span's end if its start was not seen here
    key = start_key(event, metadata)
    if event[-1] == "start":
        if key is not None and isinstance(measurements.get("system_time"), int):
            with _lock:
                starts = _starts_here()
                starts[key] = measurements["system_time"]
                while len(starts) > STARTS_KEPT:
                    starts.popitem(last=False)
        return
    with _lock:
        started = _starts_here().pop(key, None) if key is not None else None
    process = _current()
    if process.tracer is None:
        return
    caller = _caller(metadata)
    plan = plan_span(event, measurements, metadata, now, started,
                     None if caller is None else CallerSpan(caller.trace_id, caller.span_id,
                                                        caller.trace_flags.sampled),
                     process.options.caller_context)
    if plan is not None:
        _export(process.tracer, plan, caller)


def _caller(metadata: Mapping[str, Any]) -> SpanContext | None:
    traceparent = metadata.get("traceparent")
    if not isinstance(traceparent, str):
        return None
    carrier = {"traceparent": traceparent}
    if isinstance(metadata.get("tracestate"), str):
        carrier["tracestate"] = metadata["tracestate"]
    found = trace.get_current_span(_W3C.extract(carrier, context=otel_context.Context()))
    span_context = found.get_span_context()
    return span_context if span_context.is_valid else None


def _export(tracer: SdkTracer, plan: SpanPlan, caller: SpanContext | None) -> None:
    parent_context = otel_context.Context()
    if plan.parent_span_id is not None:
        if plan.parent_is_caller and caller is not None:
            parent = caller
        else:
            sampled = plan.sampled if plan.sampled is not None else _root_sampled(tracer, plan)
            parent = SpanContext(plan.trace_id, plan.parent_span_id, is_remote=True,
                                 trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled
                                                        else TraceFlags.DEFAULT),
                                 trace_state=caller.trace_state if caller is not None
                                 and plan.sampled is not None else None)
        parent_context = trace.set_span_in_context(trace.NonRecordingSpan(parent),
                                                   parent_context)
    links = [Link(caller)] if plan.link_caller and caller is not None else []
    token = _chosen.set((plan.trace_id, plan.span_id))
    try:
        span = tracer.start_span(plan.name, context=parent_context, kind=SpanKind.INTERNAL,
                                 attributes=plan.attributes, links=links,
                                 start_time=plan.start_ns)
    finally:
        _chosen.reset(token)
    if plan.exception_type is not None:
        span.add_event("exception", {"exception.type": plan.exception_type},
                       timestamp=plan.end_ns)
    if plan.error is not None:
        span.set_status(Status(StatusCode.ERROR, plan.error))
    span.end(end_time=plan.end_ns)


def _root_sampled(tracer: SdkTracer, plan: SpanPlan) -> bool:
    """Whether the invocation's root span was sampled: the same (deterministic
    in the trace id) decision the root's process made, made again here."""
    result = tracer.sampler.should_sample(otel_context.Context(), plan.trace_id,
                                          plan.root_name, SpanKind.INTERNAL)
    return result.decision in (Decision.RECORD_AND_SAMPLE,)
