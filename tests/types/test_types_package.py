"""The agl_core.types package surface: exported names and import side effects."""

import subprocess
import sys

import agl_core.types

# The "types:" line of Agent Lightning 0.3's top-level ``__all__``.
AGENT_LIGHTNING_TYPE_NAMES = [
    "Triplet",
    "RolloutLegacy",
    "Task",
    "TaskInput",
    "TaskIfAny",
    "RolloutRawResultLegacy",
    "RolloutRawResult",
    "RolloutMode",
    "GenericResponse",
    "ParallelWorkerBase",
    "Dataset",
    "AttemptStatus",
    "RolloutStatus",
    "RolloutConfig",
    "Rollout",
    "Attempt",
    "AttemptedRollout",
    "EnqueueRolloutRequest",
    "Hook",
    "Worker",
    "WorkerStatus",
    "PaginatedResult",
    "FilterOptions",
    "SortOptions",
    "FilterField",
    "Resource",
    "LLM",
    "ProxyLLM",
    "PromptTemplate",
    "ResourceUnion",
    "NamedResources",
    "ResourcesUpdate",
    "AttributeValue",
    "Attributes",
    "TraceState",
    "SpanContext",
    "TraceStatus",
    "Event",
    "Link",
    "OtelResource",
    "Span",
    "SpanNames",
    "SpanAttributeNames",
    "SpanLike",
    "StatusCode",
    "SpanCoreFields",
    "SpanRecordingContext",
]


def test_every_agent_lightning_type_name_is_exported() -> None:
    missing = [name for name in AGENT_LIGHTNING_TYPE_NAMES if name not in agl_core.types.__all__]
    assert missing == []


def test_all_is_resolvable_and_unique() -> None:
    names = agl_core.types.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(agl_core.types, name), name


def test_public_classes_and_functions_have_docstrings() -> None:
    undocumented = []
    for name in agl_core.types.__all__:
        value = getattr(agl_core.types, name)
        ours = getattr(value, "__module__", "").startswith("agl_core")
        if (isinstance(value, type) or callable(value)) and ours and not (value.__doc__ or "").strip():
            undocumented.append(name)
    assert undocumented == []


def test_import_does_not_load_opentelemetry_or_optional_engines() -> None:
    code = (
        "import sys, agl_core.types\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'jinja2', 'poml'))\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
