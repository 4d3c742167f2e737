"""JSON text of stored values, for backends that keep inputs, metadata and resources as JSON columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from agl_core.store.errors import InvalidRequestError
from agl_core.store.logic.checks import check_json_value
from agl_core.types import NamedResources

__all__ = [
    "NAMED_RESOURCES",
    "json_text",
    "metadata_json_text",
    "resources_json_text",
]

NAMED_RESOURCES: TypeAdapter[NamedResources] = TypeAdapter(NamedResources)
"""Validates and encodes a `NamedResources` mapping."""


def json_text(name: str, value: Any, where: str) -> str:
    """`value` as JSON text; `InvalidRequestError` naming `name` (and the database `where`) if it cannot be.

    NaN, Infinity and too deep nesting are refused like on every other store (`check_json_value`).
    """
    check_json_value(name, value)
    try:
        return to_json(value, inf_nan_mode="constants").decode()
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise InvalidRequestError(
            f"{name} must be JSON-serializable to be stored in {where} (dicts, lists, strings, numbers, "
            f"booleans, None or pydantic models); got {type(value).__name__}: {exc}"
        ) from None


def metadata_json_text(name: str, value: object, where: str) -> str | None:
    """A metadata dict (or None) as JSON text; anything else raises `InvalidRequestError`."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequestError(f"{name} must be a dict or None, got {type(value).__name__} {value!r}.")
    return json_text(name, dict(value), where)


def resources_json_text(resources: object) -> str:
    """Validate a `NamedResources` mapping and return it as JSON text."""
    if not isinstance(resources, Mapping):
        raise InvalidRequestError(
            "resources must be a dict of name -> resource (e.g. {'main_llm': LLM(...)}), "
            f"got {type(resources).__name__}."
        )
    try:
        validated = NAMED_RESOURCES.validate_python(dict(resources))
    except ValidationError as exc:
        raise InvalidRequestError(f"Invalid resources: {exc}") from None
    return NAMED_RESOURCES.dump_json(validated).decode()
