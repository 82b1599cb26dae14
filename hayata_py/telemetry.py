"""Lifecycle telemetry: attach handlers to hayata_py's events (see ``_telemetry``).

Events: ``("hayata", "agent", "invocation", "start" | "stop" | "exception")``,
``("hayata", "node", "execution", ...)``, ``("hayata", "edge", ...)`` and
``("hayata", "reducer", "start" | "stop")``. Handlers are called as
``handler(event, measurements, metadata, config)`` in the process where the
event happens; register them for a whole system with
``AgentSystem(telemetry_handlers={"id": ("pkg.mod:func", [event, ...])})``.
"""

from hayata_py._telemetry import (
    ENV_VAR,
    EVENTS,
    STATUSES,
    Event,
    HandlerFunction,
    HandlerInfo,
    Span,
    attach,
    detach,
    env_value,
    execute,
    install_from_env,
    list_handlers,
    log_event,
    span_exception,
    span_start,
    span_stop,
)

__all__ = [
    "ENV_VAR",
    "EVENTS",
    "STATUSES",
    "Event",
    "HandlerFunction",
    "HandlerInfo",
    "Span",
    "attach",
    "detach",
    "env_value",
    "execute",
    "install_from_env",
    "list_handlers",
    "log_event",
    "span_exception",
    "span_start",
    "span_stop",
]
