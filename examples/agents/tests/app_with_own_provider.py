"""An application with its own OpenTelemetry SDK provider runs the Anthropic agent under agl; prints JSON.

Run in a fresh process (the global provider can be set once per process) by ``test_app_provider.py``:
the application sets its provider with an in-memory exporter *before* agl starts, makes one span of its
own outside any rollout, then trains with ``Trainer.dev()``. Printed: the span names its exporter got, and
the span names agl's store got per rollout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import conftest  # noqa: E402,F401  (offline settings)
from anthropic_agent import rollout  # noqa: E402
from harness import run_agent  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from scripted_model import calculator_model  # noqa: E402

from agl_testing.fake_openai import FakeOpenAIServer  # noqa: E402


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with trace.get_tracer("my-app").start_as_current_span("app.startup"):
        pass
    rollout.instrument()
    with FakeOpenAIServer(calculator_model, token_ids="always") as fake:
        run = run_agent(rollout.anthropic_rollout, fake, "tracer")
    provider.force_flush()
    print(
        json.dumps(
            {
                "global_provider_is_the_apps": trace.get_tracer_provider() is provider,
                "exported": [span.name for span in exporter.get_finished_spans()],
                "stored": [[span.name for span in record.spans] for record in run.records],
                "statuses": [record.rollout.status for record in run.records],
            }
        )
    )


if __name__ == "__main__":
    main()
