"""Behaviour specific to the MongoDB store: URIs, partitions, document layout, escaping, schema checks."""

from __future__ import annotations

import math

import pytest
from pymongo import MongoClient

from agl_core.store import InvalidRequestError
from agl_core.types import LLM
from agl_mongo import MongoLightningStore, SchemaVersionError
from agl_mongo.keys import key, prefix_range, span_key
from agl_mongo.uri import parse_mongo_uri, redact
from agl_testing.store_conformance import make_span


def test_uri_parsing_takes_database_and_partition_out() -> None:
    """database comes from ?database= or the path; agl options never reach pymongo."""
    parsed = parse_mongo_uri("mongodb://h:1/fromPath?directConnection=true&partition_id=p1")
    assert (parsed.database, parsed.partition_id) == ("fromPath", "p1")
    assert parsed.client_uri == "mongodb://h:1/fromPath?directConnection=true"
    parsed = parse_mongo_uri("mongodb+srv://c.example.net/fromPath?database=fromQuery")
    assert (parsed.database, parsed.partition_id) == ("fromQuery", None)
    untouched = "mongodb://h1:1,h2:2/?replicaSet=rs0&readPreference=secondaryPreferred"
    assert parse_mongo_uri(untouched).client_uri == untouched
    assert parse_mongo_uri("mongodb://h:1").database is None


@pytest.mark.parametrize("uri", ["redis://h:1", "http://h:1", "mongodb:/h", 7])
def test_non_mongo_uri_is_rejected(uri: object) -> None:
    """A URI of another scheme raises InvalidRequestError naming the expected form."""
    with pytest.raises(InvalidRequestError, match="mongodb://"):
        MongoLightningStore(uri)  # type: ignore[arg-type]


def test_constructor_defaults_and_overrides() -> None:
    """Keyword arguments win over the URI; defaults are database 'agl' and partition 'default'."""
    plain = MongoLightningStore("mongodb://127.0.0.1:1/")
    assert (plain.database, plain.partition_id) == ("agl", "default")
    store = MongoLightningStore.from_uri(
        "mongodb://127.0.0.1:1/a?partition_id=b", database="c", partition_id="d"
    )
    assert (store.database, store.partition_id) == ("c", "d")
    with pytest.raises(InvalidRequestError, match="partition_id"):
        MongoLightningStore("mongodb://127.0.0.1:1/", partition_id="")
    with pytest.raises(InvalidRequestError, match="retry_timeout"):
        MongoLightningStore("mongodb://127.0.0.1:1/", retry_timeout=-1)


def test_agent_lightning_03_keyword_names() -> None:
    """0.3's ``MongoLightningStore(mongo_uri=..., database_name=..., mongo_client_kwargs=...)`` works."""
    store = MongoLightningStore(
        mongo_uri="mongodb://user:secret@127.0.0.1:1/?replicaSet=rs0",
        database_name="legacy",
        mongo_client_kwargs={"appname": "legacy-app"},
        partition_id="p",
    )
    assert (store.database, store.partition_id) == ("legacy", "p")
    assert "secret" not in store.uri and "127.0.0.1:1" in store.uri
    with pytest.raises(InvalidRequestError, match=r"database= or its Agent Lightning 0\.3 name"):
        MongoLightningStore(database="a", database_name="b")
    with pytest.raises(InvalidRequestError, match="tracker"):
        MongoLightningStore(tracker=object())


def test_redact_hides_only_the_password() -> None:
    """Messages show the user and hosts but never the password."""
    assert redact("mongodb://u:p%40ss@h:1,h2:2/db?x=1") == "mongodb://u:***@h:1,h2:2/db?x=1"
    assert redact("mongodb://h:1/db") == "mongodb://h:1/db"


async def test_partitions_share_a_database_without_seeing_each_other(mongo_uri: str, database: str) -> None:
    """Stores of two partitions in one database have separate queues, workers, resources and counts."""
    a1 = MongoLightningStore(mongo_uri, database=database, partition_id="trainer-a")
    a2 = MongoLightningStore(mongo_uri, database=database, partition_id="trainer-a")
    b = MongoLightningStore(mongo_uri, database=database, partition_id="trainer-b")
    try:
        queued = await a1.enqueue_rollout("for a")
        resources = await a1.add_resources({"llm": LLM(endpoint="http://a/v1", model="a")})
        assert await b.dequeue_rollout(worker_id="wb") is None
        assert await b.get_latest_resources() is None
        assert await b.get_rollout_by_id(queued.rollout_id) is None
        claimed = await a2.dequeue_rollout(worker_id="wa")
        assert claimed is not None and claimed.rollout_id == queued.rollout_id
        assert await a2.get_latest_resources() == resources
        stats_a, stats_b = await a1.statistics(), await b.statistics()
        assert (stats_a["total_rollouts"], stats_a["total_workers"]) == (1, 1)
        assert (stats_b["total_rollouts"], stats_b["total_workers"], stats_b["total_resources"]) == (0, 1, 0)
        assert [w.worker_id for w in await b.query_workers()] == ["wb"]
    finally:
        for store in (a1, a2, b):
            await store.close()


async def test_documents_are_versioned_keyed_and_indexed(mongo_uri: str, database: str) -> None:
    """Documents carry the schema version and are keyed by partition and ids; indexes exist after use."""
    store = MongoLightningStore(mongo_uri, database=database)
    try:
        started = await store.start_rollout("x")
        span = make_span(started.rollout_id, started.attempt.attempt_id, 1)
        await store.add_span(span)
        await store.add_resources({"llm": LLM(endpoint="http://a/v1", model="a")})
    finally:
        await store.close()
    with MongoClient(mongo_uri) as client:
        db = client[database]
        for name in ("rollouts", "spans", "resources"):
            docs = list(db[name].find({}))
            assert docs and all(doc["v"] == 1 and doc["pt"] == "default" for doc in docs), name
        (rollout,) = db["rollouts"].find({})
        assert rollout["_id"] == key("default", started.rollout_id)
        assert [a["attempt_id"] for a in rollout["attempts"]] == [started.attempt.attempt_id]
        (stored,) = db["spans"].find({})
        assert stored["_id"] == span_key("default", span.rollout_id, 1)
        indexes = [tuple(index["key"]) for index in db["rollouts"].list_indexes()]
        assert ("qk",) in indexes and ("pt", "wd", "status") in indexes
        (unique,) = [i for i in db["spans"].list_indexes() if i.get("unique")]
        assert tuple(unique["key"]) == ("pt", "rollout_id", "attempt_id", "span_id")


def test_keys_are_injective_and_ranges_are_tight() -> None:
    """Keys of different id tuples differ; a prefix range holds exactly the keys under its prefix."""
    assert key("a/1", "b") != key("a", "1/b")
    assert key("a:b", "c") != key("a", "b:c")
    span_range = prefix_range("p", "ro-1")
    inside = [key("p", "ro-1", "at-1", "s"), key("p", "ro-1", "", "\U0001f600"), span_key("p", "ro-1", 7)]
    outside = [key("p", "ro-10", "at-1", "s"), key("p", "ro-1"), key("pp", "ro-1", "a", "s"), key("p")]
    assert all(span_range["$gte"] <= k < span_range["$lt"] for k in inside)
    assert not any(span_range["$gte"] <= k < span_range["$lt"] for k in outside)


async def test_newer_schema_is_refused(mongo_uri: str, database: str) -> None:
    """A database written by a newer agl-mongo raises SchemaVersionError instead of being misread."""
    with MongoClient(mongo_uri) as client:
        client[database]["meta"].insert_one({"_id": "schema", "version": 99})
    store = MongoLightningStore(mongo_uri, database=database)
    try:
        with pytest.raises(SchemaVersionError, match="99"):
            await store.enqueue_rollout("x")
    finally:
        await store.close()


async def test_contains_escapes_regex_metacharacters(mongo_uri: str, database: str) -> None:
    """*_contains is a literal, case-sensitive substring even for '.', '*', '(' or '$'."""
    store = MongoLightningStore(mongo_uri, database=database)
    try:
        started = await store.start_rollout("x")
        rid, aid = started.rollout_id, started.attempt.attempt_id
        for seq, name in enumerate(["a.c", "abc", "A.C", "x(y)*$", "x(y)"], start=1):
            await store.add_span(make_span(rid, aid, seq, name=name))

        async def names(text: str) -> list[str]:
            return [s.name for s in await store.query_spans(rid, name_contains=text)]

        assert await names("a.c") == ["a.c"]
        assert await names("(y)*$") == ["x(y)*$"]
        assert await names("x(y)") == ["x(y)*$", "x(y)"]
        assert await names(".") == ["a.c", "A.C"]
        assert [r.rollout_id for r in await store.query_rollouts(rollout_id_contains=".*")] == []
    finally:
        await store.close()


async def test_free_form_values_round_trip(mongo_uri: str, database: str) -> None:
    """Inputs and metadata keep keys MongoDB forbids as field names and big integers; NaN is refused."""
    store = MongoLightningStore(mongo_uri, database=database)
    value = {"a.b": 1, "$set": [1, 2], "big": 2**70, "nested": {"x.y": None}}
    try:
        queued = await store.enqueue_rollout(value, metadata={"gen_ai.model": "m", "$k": 2**64})
        fetched = await store.get_rollout_by_id(queued.rollout_id)
        assert fetched is not None
        assert fetched.metadata == {"gen_ai.model": "m", "$k": 2**64}
        assert fetched.input == value
        with pytest.raises(InvalidRequestError, match="NaN or Infinity"):  # JSON has none (issue 20)
            await store.enqueue_rollout({"nan": math.nan})
        with pytest.raises(InvalidRequestError, match="JSON-serializable"):
            await store.enqueue_rollout(object())
    finally:
        await store.close()
