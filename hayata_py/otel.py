"""Export hayata_py's lifecycle telemetry as OpenTelemetry traces (``pip install hayata_py[otel]``).

One trace per invocation (its trace id is :func:`trace_id_for` of the
invocation id), a span per node execution, edge task and reducer, each edge's
span a child of its node's even though they run in other processes::

    import hayata_py as hy
    from hayata_py import otel

    with hy.AgentSystem("data", telemetry_handlers=otel.handlers(
            setup="myapp.tracing:setup")) as system:
        ...

``setup`` is called once in every actor process and returns the
``TracerProvider`` (with its exporter) that process exports with. Attributes
come from the telemetry metadata only (ids, status, class names, codes),
never inputs, results or exception messages. See docs/guide/telemetry.md, "OpenTelemetry".
"""

try:
    import opentelemetry.sdk.trace  # noqa: F401 - fail here with the fix, not deep inside
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("hayata_py.otel needs OpenTelemetry: pip install 'hayata_py[otel]'"
                      ) from exc

from hayata_py._otel._handler import (
    HANDLER_ID,
    OPTIONS_ENV_VAR,
    SPAN_EVENTS,
    handle,
    handlers,
    trace_context,
)
from hayata_py._otel._plan import DISCRIMINATORS, HIDDEN_KEYS, span_id_for, trace_id_for

__all__ = [
    "DISCRIMINATORS",
    "HANDLER_ID",
    "HIDDEN_KEYS",
    "OPTIONS_ENV_VAR",
    "SPAN_EVENTS",
    "handle",
    "handlers",
    "span_id_for",
    "trace_context",
    "trace_id_for",
]
