"""Small shared helpers (OpenTelemetry attribute utilities live in :mod:`agl_core.utils.otel`)."""
