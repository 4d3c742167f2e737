"""Versioned migrations of the PostgreSQL store's schema, applied at open or by ``agl postgres migrate``.

Every store lives in its own PostgreSQL schema (``?schema=NAME``, default ``agl``), so one database can
hold several deployments. ``schema_migrations`` records each applied version. `migrate` runs in one
transaction under a transaction-scoped advisory lock keyed by the schema name, so concurrent openers
apply each migration exactly once and a failed migration leaves nothing behind.

Layout of version 1 (``ord`` columns are identity sequences: insertion order, allocated without any
table lock):

- ``rollouts``: one row per rollout; ``queue_pos`` (from the ``queue_positions`` sequence) is set while
  it is queued, NULL otherwise (partial index ``rollouts_queue``: the claim reads its head with
  ``FOR UPDATE SKIP LOCKED``); ``attempt_count``/``latest_attempt_id`` describe its attempts;
  ``timeout_seconds``/``unresponsive_seconds`` mirror the config for the watchdog (partial index
  ``rollouts_watched``); ``rev`` grows with every write to the rollout or one of its attempts, so a
  decision read in one statement is written only if nothing changed meanwhile (compare-and-set).
  Nested values are JSON text, as in the SQLite store.
- ``attempts``: key ``(rollout_id, attempt_id)``; ``claim_token`` lets a claim retried after a lost
  acknowledgement find what it claimed.
- ``spans``: the span as JSON plus its filter columns; unique ``(rollout_id, attempt_id, span_id)``,
  index ``(rollout_id, sequence_id, ord)``.
- ``span_counters``: last sequence id issued per rollout (row-level upserts: no table lock).
- ``resources``, ``workers``: one row per id; ``meta``: ``latest_resources_id``.
- ``cas_conflict()`` aborts a statement whose compare-and-set lost a race after a part of it was
  written (SQLSTATE ``AGLCS``), so the statement applies nothing and the caller re-reads.
- A trigger sends ``NOTIFY agl_finished`` (payload: the schema) when a rollout reaches a finished
  status, waking every `wait_for_rollouts` on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agl_postgres.errors import SchemaVersionError

__all__ = [
    "CAS_CONFLICT",
    "FINISHED_CHANNEL",
    "MIGRATIONS",
    "Migration",
    "current_version",
    "migrate",
    "pending",
]

FINISHED_CHANNEL = "agl_finished"
"""``LISTEN`` channel notified (payload: schema name) when a rollout reaches a finished status."""

CAS_CONFLICT = "AGLCS"
"""SQLSTATE raised by ``cas_conflict()``."""

WATCHED_ROLLOUTS = (
    "status IN ('preparing', 'running') AND (timeout_seconds IS NOT NULL OR unresponsive_seconds IS NOT NULL)"
)
"""Condition of the ``rollouts_watched`` partial index; the watchdog query repeats it to use it."""


@dataclass(frozen=True)
class Migration:
    """One schema version: its number, a short name and the statements that create it."""

    version: int
    name: str
    statements: tuple[str, ...]


_V1 = Migration(
    1,
    "initial schema",
    (
        "CREATE SEQUENCE queue_positions",
        """CREATE TABLE rollouts (
            ord bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            rollout_id text NOT NULL UNIQUE,
            status text NOT NULL,
            start_time double precision NOT NULL,
            end_time double precision,
            mode text,
            resources_id text,
            input text NOT NULL,
            config text NOT NULL,
            metadata text,
            queue_pos bigint,
            attempt_count integer NOT NULL DEFAULT 0,
            latest_attempt_id text,
            timeout_seconds double precision,
            unresponsive_seconds double precision,
            rev bigint NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX rollouts_queue ON rollouts (queue_pos) WHERE queue_pos IS NOT NULL",
        f"CREATE INDEX rollouts_watched ON rollouts (status) WHERE {WATCHED_ROLLOUTS}",
        """CREATE TABLE attempts (
            rollout_id text NOT NULL,
            attempt_id text NOT NULL,
            sequence_id integer NOT NULL,
            status text NOT NULL,
            start_time double precision NOT NULL,
            end_time double precision,
            worker_id text,
            last_heartbeat_time double precision,
            metadata text,
            claim_token text,
            PRIMARY KEY (rollout_id, attempt_id)
        )""",
        "CREATE INDEX attempts_claim_token ON attempts (claim_token) WHERE claim_token IS NOT NULL",
        """CREATE TABLE spans (
            ord bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            rollout_id text NOT NULL,
            attempt_id text NOT NULL,
            span_id text NOT NULL,
            sequence_id bigint NOT NULL,
            trace_id text,
            parent_id text,
            name text,
            start_time double precision,
            end_time double precision,
            data text NOT NULL,
            UNIQUE (rollout_id, attempt_id, span_id)
        )""",
        "CREATE INDEX spans_by_sequence ON spans (rollout_id, sequence_id, ord)",
        """CREATE TABLE span_counters (
            rollout_id text PRIMARY KEY,
            value bigint NOT NULL,
            step integer NOT NULL DEFAULT 1
        )""",
        """CREATE TABLE resources (
            ord bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            resources_id text NOT NULL UNIQUE,
            create_time double precision NOT NULL,
            update_time double precision NOT NULL,
            version integer NOT NULL,
            resources text NOT NULL
        )""",
        """CREATE TABLE workers (
            ord bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            worker_id text NOT NULL UNIQUE,
            status text NOT NULL DEFAULT 'unknown',
            heartbeat_stats text,
            last_heartbeat_time double precision,
            last_dequeue_time double precision,
            last_busy_time double precision,
            last_idle_time double precision,
            current_rollout_id text,
            current_attempt_id text
        )""",
        "CREATE TABLE meta (key text PRIMARY KEY, value text)",
        f"""CREATE FUNCTION notify_finished() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{FINISHED_CHANNEL}', TG_TABLE_SCHEMA);
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION cas_conflict() RETURNS bigint LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'agl-postgres: the rollout changed concurrently' USING ERRCODE = 'AGLCS';
        END $$""",
        """CREATE TRIGGER rollouts_finished AFTER INSERT OR UPDATE OF status ON rollouts
            FOR EACH ROW WHEN (NEW.status IN ('failed', 'succeeded', 'cancelled'))
            EXECUTE FUNCTION notify_finished()""",
    ),
)

MIGRATIONS: tuple[Migration, ...] = (_V1,)
"""Every schema version in order; the last is the current one. Never edit a released migration."""

_LEDGER = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


def quote_ident(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


async def current_version(conn: Any, schema: str) -> int | None:
    """The schema's applied version; 0 for an empty or missing schema; None if it is not an agl store."""
    tables = {
        row[0] for row in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    }
    if "schema_migrations" not in tables:
        return 0 if not tables else None
    version = await conn.fetchval(f"SELECT max(version) FROM {quote_ident(schema)}.schema_migrations")
    return int(version or 0)


async def pending(conn: Any, schema: str) -> list[Migration]:
    """The migrations `migrate` would apply now (checks the version like `migrate`)."""
    version = await current_version(conn, schema)
    _check(version, schema)
    return [m for m in MIGRATIONS if m.version > (version or 0)]


def _check(version: int | None, schema: str) -> None:
    target = MIGRATIONS[-1].version
    if version is None:
        raise SchemaVersionError(
            f"PostgreSQL schema {schema!r} holds tables that agl did not create, so it is not an agl store. "
            "Pick another schema (?schema=NAME)."
        )
    if version > target:
        raise SchemaVersionError(
            f"PostgreSQL schema {schema!r} has store schema version {version}, but this agl-postgres only "
            f"knows versions up to {target}. Upgrade agl-postgres (downgrading is not supported)."
        )


async def migrate(conn: Any, schema: str) -> list[Migration]:
    """Bring `schema` to the newest version in one transaction; return the migrations applied.

    Safe to run from many processes at once: a transaction-scoped advisory lock on the schema name
    serialises them, and each re-reads the version under the lock.
    """
    quoted = quote_ident(schema)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agl-postgres:' || $1::text))", schema)
        version = await current_version(conn, schema)
        _check(version, schema)
        todo = [m for m in MIGRATIONS if m.version > (version or 0)]
        if not todo:
            return []
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
        await conn.execute(f"SET LOCAL search_path TO {quoted}")
        await conn.execute(_LEDGER)
        for migration in todo:
            for statement in migration.statements:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                migration.version,
                migration.name,
            )
    return todo
