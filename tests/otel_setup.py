"""OpenTelemetry setups used by the tests (importable in every actor process).

``to_file`` gives each process its own SDK ``TracerProvider`` whose exporter
appends each finished span as a JSON line to ``$HAYATA_TEST_OTEL``, so a test
can read what every actor process exported. ``in_memory`` keeps spans in this
process (:data:`MEMORY`), for tests that call the handler directly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

MEMORY = InMemorySpanExporter()
SAMPLER: Sampler | None = None  # set by a test before in_memory() runs


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain JSON-able data (ids as 32/16 hex digits)."""
    ctx = span.context
    assert ctx is not None
    return {
        "name": span.name, "trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "parent_remote": span.parent.is_remote if span.parent else None,
        "sampled": ctx.trace_flags.sampled, "kind": span.kind.name,
        "status": span.status.status_code.name, "description": span.status.description,
        "attributes": {k: list(v) if isinstance(v, tuple) else v
                       for k, v in (span.attributes or {}).items()},
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})}
                   for e in span.events],
        "links": [{"trace_id": f"{link.context.trace_id:032x}",
                   "span_id": f"{link.context.span_id:016x}"} for link in span.links],
        "start": span.start_time, "end": span.end_time, "pid": os.getpid(),
    }


class FileExporter(SpanExporter):
    """Appends each span as one JSON line (one ``write`` call, so lines from
    several processes do not interleave)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(as_dict(s)) + "\n" for s in spans)
        with open(self.path, "a") as f:
            f.write(lines)
        return SpanExportResult.SUCCESS


def to_file() -> TracerProvider:
    with open(os.environ["HAYATA_TEST_OTEL"] + ".setups", "a") as f:
        f.write(f"{os.getpid()}\n")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(os.environ["HAYATA_TEST_OTEL"])))
    return provider


def in_memory() -> TracerProvider:
    provider = TracerProvider(sampler=SAMPLER) if SAMPLER else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(MEMORY))
    return provider


def failing() -> TracerProvider:
    raise RuntimeError("no collector configured")


def not_a_setup() -> str:
    return "not a provider"


def read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def otlp() -> TracerProvider:
    """The telemetry guide's setup: batches spans to the OTLP/HTTP collector that the
    standard ``OTEL_EXPORTER_OTLP_*`` variables name."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "hayata-test"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
