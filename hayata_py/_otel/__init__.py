"""OpenTelemetry export of the lifecycle telemetry (the ``otel`` extra); see ``hayata_py.otel``."""
