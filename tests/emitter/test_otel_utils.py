"""agl_core.utils.otel: flatten/unflatten, sanitizing, tags, links, provider lookup (as in Agent Lightning
0.3)."""

from __future__ import annotations

import logging

import pytest

from agl_core.semconv import LinkPydanticModel
from agl_core.tracer.otel import OtelTracer
from agl_core.types import Span
from agl_core.utils.otel import (
    check_attributes_sanity,
    extract_links_from_attributes,
    extract_tags_from_attributes,
    filter_and_unflatten_attributes,
    filter_attributes,
    flatten_attributes,
    format_exception_attributes,
    full_qualified_name,
    get_tracer,
    get_tracer_provider,
    make_link_attributes,
    make_tag_attributes,
    query_linked_spans,
    sanitize_attribute_value,
    sanitize_attributes,
    sanitize_list_attribute_sanity,
    unflatten_attributes,
)


def test_flatten_keeps_homogeneous_leaf_lists_and_expands_the_rest() -> None:
    nested = {"a": {"b": 1, "c": [2, 3]}, "d": [{"e": "x"}, {"e": "y"}], "empty": []}
    assert flatten_attributes(nested) == {"a.b": 1, "a.c": [2, 3], "d.0.e": "x", "d.1.e": "y"}
    assert flatten_attributes({"c": [2, 3]}, expand_leaf_lists=True) == {"c.0": 2, "c.1": 3}


def test_flatten_mixed_list_expands_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert flatten_attributes({"m": [1, "a"]}) == {"m.0": 1, "m.1": "a"}
    assert "mixes" in caplog.text


def test_flatten_rejects_non_str_keys() -> None:
    with pytest.raises(ValueError, match="keys must be strings"):
        flatten_attributes({"a": {1: "x"}})


def test_unflatten_inverts_flatten_and_builds_lists() -> None:
    nested = {"a": {"b": 1, "c": [{"x": 1}, {"x": 2}]}, "s": "t"}
    assert unflatten_attributes(flatten_attributes(nested)) == nested
    assert unflatten_attributes({"0": "a", "1": "b"}) == ["a", "b"]
    assert unflatten_attributes({"k.0": 1, "k.2": 2}) == {"k": {"0": 1, "2": 2}}  # not 0..n-1


def test_filter_helpers() -> None:
    attributes = {"p.0.name": "x", "p.0.value": 1.0, "px": 3, "q": 1}
    assert filter_attributes(attributes, "p") == {"p.0.name": "x", "p.0.value": 1.0}
    assert filter_and_unflatten_attributes(attributes, "p") == [{"name": "x", "value": 1.0}]
    with pytest.raises(ValueError, match="equals the prefix"):
        filter_and_unflatten_attributes({"p": 1}, "p")


def test_sanitizing() -> None:
    assert sanitize_list_attribute_sanity([True, False]) == [True, False]
    assert sanitize_list_attribute_sanity([1, True]) == [1, 1]
    assert sanitize_list_attribute_sanity([1, 2.5]) == [1.0, 2.5]
    with pytest.raises(ValueError, match="one primitive type"):
        sanitize_list_attribute_sanity(["a", 1])
    assert sanitize_attribute_value(["a", 1]) == '["a", 1]'
    assert sanitize_attribute_value({"k": [1]}) == '{"k": [1]}'
    assert sanitize_attribute_value(None) == "null"
    assert sanitize_attribute_value(object()).startswith('"<object object')
    with pytest.raises(ValueError, match="not JSON serializable"):
        sanitize_attribute_value(object(), force=False)
    with pytest.raises(ValueError, match="Attribute 'bad'"):
        sanitize_attributes({"bad": object()}, force=False)


def test_check_attributes_sanity() -> None:
    check_attributes_sanity({"a": 1, "b": ["x", "y"], "c": [1.0, 2]})
    with pytest.raises(ValueError, match="keys must be strings"):
        check_attributes_sanity({1: "a"})
    with pytest.raises(ValueError, match="'d'"):
        check_attributes_sanity({"d": ["a", 1]})
    with pytest.raises(ValueError, match="'e' has a value of type dict"):
        check_attributes_sanity({"e": {}})


def test_exception_attributes() -> None:
    attributes = format_exception_attributes(ValueError("v"))
    assert attributes == {"exception.type": "ValueError", "exception.message": "v", "exception.escaped": True}


def test_tags_and_links_round_trip() -> None:
    tags = make_tag_attributes(["fast", "gen_ai.model:x"])
    assert tags == {"agentlightning.tag.0": "fast", "agentlightning.tag.1": "gen_ai.model:x"}
    assert extract_tags_from_attributes(tags) == ["fast", "gen_ai.model:x"]
    links = make_link_attributes({"gen_ai.response.id": "r1", "span_id": "abc"})
    assert extract_links_from_attributes(links) == [
        LinkPydanticModel(key_match="gen_ai.response.id", value_match="r1"),
        LinkPydanticModel(key_match="span_id", value_match="abc"),
    ]
    assert extract_tags_from_attributes({}) == [] and extract_links_from_attributes({}) == []
    with pytest.raises(ValueError, match="must be a str"):
        make_link_attributes({"k": 1})


def test_query_linked_spans_matches_attributes_and_ids() -> None:
    a = Span.from_attributes(attributes={"gen_ai.response.id": "r1"}, span_id="1" * 16, trace_id="a" * 32)
    b = Span.from_attributes(attributes={"gen_ai.response.id": "r2"}, span_id="2" * 16, trace_id="a" * 32)
    by_response = [LinkPydanticModel(key_match="gen_ai.response.id", value_match="r2")]
    assert query_linked_spans([a, b], by_response) == [b]
    by_ids = [
        LinkPydanticModel(key_match="trace_id", value_match="a" * 32),
        LinkPydanticModel(key_match="span_id", value_match="1" * 16),
    ]
    assert query_linked_spans([a, b], by_ids) == [a]
    assert query_linked_spans([a, b], []) == [a, b]


def test_full_qualified_name() -> None:
    assert full_qualified_name(dict) == "dict"
    assert full_qualified_name(Span) == "agl_core.types.tracer.Span"


async def test_provider_lookup_follows_the_active_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace as trace_api

    tracer = OtelTracer(instrument_llm_clients=False, global_provider=False)
    tracer.init_worker(0)
    try:
        async with tracer.trace_context():
            assert get_tracer_provider() is tracer.tracer_provider
            get_tracer().start_span("via-helper").end()
            get_tracer(use_active_span_processor=False).start_span("not-exported").end()
        assert [s.name for s in tracer.get_last_trace()] == ["via-helper"]
    finally:
        tracer.teardown_worker(0)
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER", None)  # as if no SDK provider was ever installed
    with pytest.raises(RuntimeError, match="No OpenTelemetry SDK tracer provider"):
        get_tracer_provider()
