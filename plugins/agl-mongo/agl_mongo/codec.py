"""Encoding between agl models and MongoDB documents, and the argument checks run before any write.

Free-form values (a rollout's ``input``, metadata, configs, resources, span bodies, heartbeat stats)
are stored as JSON text, exactly as the SQLite store stores them: MongoDB field names may not hold
every key a user writes (dots, a leading ``$``) and BSON has no big integers, so JSON text gives the
same round trip in every backend. Fields the store filters, sorts or updates are plain BSON fields.

Documents are read back without re-validation (the store only reads what it validated and wrote);
spans and resources, whose nested models carry extra fields, go through pydantic's JSON validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from agl_core.store import InvalidRequestError
from agl_core.store.logic.encoding import NAMED_RESOURCES, json_text, metadata_json_text
from agl_core.store.logic.encoding import resources_json_text as dump_resources
from agl_core.store.logic.queries import check_id
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Span,
    Worker,
)

__all__ = [
    "SCHEMA_VERSION",
    "attempt_from_entry",
    "attempts_of",
    "check_id",
    "config_fields",
    "config_from_json",
    "dump_json",
    "dump_resources",
    "load_json",
    "metadata_json",
    "new_attempt_entry",
    "resources_from_doc",
    "rollout_from_doc",
    "span_doc",
    "span_from_doc",
    "worker_from_doc",
]

SCHEMA_VERSION = 1
"""Layout version written into every document (field ``v``) and into the ``meta`` collection."""

_CONFIG_CACHE: dict[str, RolloutConfig] = {}

# ---------------------------------------------------------------------------------------------- JSON


def dump_json(name: str, value: Any) -> str:
    """`value` as JSON text; `InvalidRequestError` naming `name` if it cannot be encoded."""
    return json_text(name, value, "MongoDB")


def metadata_json(name: str, value: object) -> str | None:
    """A metadata dict (or None) as JSON text; anything else raises `InvalidRequestError`."""
    return metadata_json_text(name, value, "MongoDB")


def load_json(text: str | None) -> Any:
    """Decode a JSON field (None stays None)."""
    return None if text is None else from_json(text)


def config_fields(config: object) -> tuple[str, bool]:
    """``(config JSON, watched)`` of a rollout config; watched: it has a timeout or unresponsive limit.

    Accepts None (the default config), a `RolloutConfig` or a dict of its fields.
    """
    if config is None:
        config = RolloutConfig()
    elif isinstance(config, Mapping):
        try:
            config = RolloutConfig.model_validate(config)
        except ValidationError as exc:
            raise InvalidRequestError(f"Invalid rollout config {dict(config)!r}: {exc}") from None
    elif not isinstance(config, RolloutConfig):
        raise InvalidRequestError(
            "config must be a RolloutConfig (or a dict of its fields), "
            f"got {type(config).__name__} {config!r}."
        )
    watched = config.timeout_seconds is not None or config.unresponsive_seconds is not None
    return config.model_dump_json(), watched


def config_from_json(text: str) -> RolloutConfig:
    """A fresh `RolloutConfig` from its stored JSON (parsed once per distinct text)."""
    cached = _CONFIG_CACHE.get(text)
    if cached is None:
        cached = RolloutConfig.model_validate_json(text)
        if len(_CONFIG_CACHE) >= 1024:
            _CONFIG_CACHE.clear()
        _CONFIG_CACHE[text] = cached
    return cached.model_copy(update={"retry_condition": list(cached.retry_condition)})


# ---------------------------------------------------------------------------------------------- documents


def new_attempt_entry(attempt_id: str, now: float, worker_id: str | None, token: str) -> dict[str, Any]:
    """The embedded document of a new ``preparing`` attempt; `token` identifies the call that made it."""
    return {
        "attempt_id": attempt_id,
        "start_time": now,
        "end_time": None,
        "status": "preparing",
        "worker_id": worker_id,
        "last_heartbeat_time": None,
        "metadata": None,
        "token": token,
    }


def attempt_from_entry(rollout_id: str, entry: Mapping[str, Any], sequence_id: int) -> Attempt:
    """An `Attempt` from its embedded document; its sequence id is its 1-based position."""
    return Attempt.model_construct(
        rollout_id=rollout_id,
        attempt_id=entry["attempt_id"],
        sequence_id=sequence_id,
        start_time=entry["start_time"],
        end_time=entry.get("end_time"),
        status=entry["status"],
        worker_id=entry.get("worker_id"),
        last_heartbeat_time=entry.get("last_heartbeat_time"),
        metadata=load_json(entry.get("metadata")),
    )


def attempts_of(doc: Mapping[str, Any]) -> list[Attempt]:
    """Every attempt of a rollout document, oldest first."""
    rollout_id = doc["rollout_id"]
    return [attempt_from_entry(rollout_id, e, i) for i, e in enumerate(doc.get("attempts") or (), 1)]


def rollout_from_doc(doc: Mapping[str, Any], *, with_attempt: bool = True) -> Rollout:
    """The `Rollout` of a document; an `AttemptedRollout` with its latest attempt when it has one."""
    values = {
        "rollout_id": doc["rollout_id"],
        "input": load_json(doc["input"]),
        "start_time": doc["start_time"],
        "end_time": doc.get("end_time"),
        "mode": doc.get("mode"),
        "resources_id": doc.get("resources_id"),
        "status": doc["status"],
        "config": config_from_json(doc["config"]),
        "metadata": load_json(doc.get("metadata")),
    }
    attempts = doc.get("attempts")
    if with_attempt and attempts:
        values["attempt"] = attempt_from_entry(doc["rollout_id"], attempts[-1], len(attempts))
        return AttemptedRollout.model_construct(**values)
    return Rollout.model_construct(**values)


def worker_from_doc(doc: Mapping[str, Any]) -> Worker:
    """A `Worker` from its document."""
    return Worker.model_construct(
        worker_id=doc["worker_id"],
        status=doc.get("status", "unknown"),
        heartbeat_stats=load_json(doc.get("heartbeat_stats")),
        last_heartbeat_time=doc.get("last_heartbeat_time"),
        last_dequeue_time=doc.get("last_dequeue_time"),
        last_busy_time=doc.get("last_busy_time"),
        last_idle_time=doc.get("last_idle_time"),
        current_rollout_id=doc.get("current_rollout_id"),
        current_attempt_id=doc.get("current_attempt_id"),
    )


def resources_from_doc(doc: Mapping[str, Any]) -> ResourcesUpdate:
    """A `ResourcesUpdate` from its document."""
    return ResourcesUpdate.model_construct(
        resources_id=doc["resources_id"],
        create_time=doc["create_time"],
        update_time=doc["update_time"],
        version=doc["version"],
        resources=NAMED_RESOURCES.validate_json(doc["resources"]),
    )


def span_doc(partition: str, span: Span, order: int, token: str) -> dict[str, Any]:
    """The document of a validated span: key and query fields, insertion order `order`, JSON body."""
    return {
        "v": SCHEMA_VERSION,
        "pt": partition,
        "rollout_id": span.rollout_id,
        "attempt_id": span.attempt_id,
        "span_id": span.span_id,
        "sequence_id": span.sequence_id,
        "trace_id": span.trace_id,
        "parent_id": span.parent_id,
        "name": span.name,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "o": order,
        "token": token,
        "data": span.model_dump_json(),
    }


def span_from_doc(doc: Mapping[str, Any]) -> Span:
    """A `Span` from its document's JSON body."""
    return Span.model_validate_json(doc["data"])


# ---------------------------------------------------------------------------------------------- checks
