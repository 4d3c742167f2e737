"""Schema, migrations and connection setup of `SqliteLightningStore`.

The schema version lives in ``PRAGMA user_version``; ``PRAGMA application_id`` marks the file as an
agl store so a stranger's database is never migrated by accident. `MIGRATIONS` maps each version to
the function that upgrades a file from the previous version; `open_connection` applies the missing
ones in order, in one ``BEGIN IMMEDIATE`` transaction, so concurrent openers migrate exactly once.

Layout (every table's rowid, where it has one, is its insertion order):

- ``rollouts``: one row per rollout (indexed by status and by start time since version 2).
  ``queue_pos`` is its FIFO position while it has a queue entry (NULL otherwise; like the in-memory
  deque, an entry whose rollout left ``queuing``/``requeuing`` other than by a claim stays until
  dequeue drops it); ``attempt_count``/``latest_attempt_id`` describe its attempts;
  ``timeout_seconds``/``unresponsive_seconds`` mirror the config for the watchdog, whose partial index
  ``rollouts_watched`` holds only active rollouts that have a deadline.
  Nested values (``input``, ``config``, ``metadata``) are JSON text.
- ``attempts``: keyed by ``(rollout_id, attempt_id)``.
- ``spans``: the whole span as JSON plus its indexed/filterable fields; unique
  ``(rollout_id, attempt_id, span_id)``; index ``(rollout_id, sequence_id)``.
- ``span_counters``: the last span sequence id issued per rollout (ids may be issued before the rollout
  exists). The effective counter is the larger of it and the rollout's largest stored span sequence id
  (an index seek), so adding a span never writes the counter.
- ``resources``, ``workers``: one row per snapshot id / worker id; workers are indexed by status.
- ``meta``: key/value pairs (``latest_resources_id``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from urllib.parse import quote

from agl_core.store.errors import StoreCorruptError, StoreError, StoreOpenError

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "WATCHED_ROLLOUTS",
    "SchemaVersionError",
    "apply_migrations",
    "configure_connection",
    "open_connection",
]

APPLICATION_ID = 0x61676C31
"""``PRAGMA application_id`` of agl store files (ASCII ``agl1``)."""

Migration = Callable[[sqlite3.Connection], None]

WATCHED_ROLLOUTS = (
    "status IN ('preparing', 'running') AND (timeout_seconds IS NOT NULL OR unresponsive_seconds IS NOT NULL)"
)
"""Condition of the ``rollouts_watched`` partial index; queries must repeat it verbatim to use it."""


class SchemaVersionError(StoreError):
    """The database file was written by a newer agl (or is not an agl store at all)."""


def _create_v1(conn: sqlite3.Connection) -> None:
    """Version 1: the initial schema."""
    statements = (
        """CREATE TABLE rollouts (
            ord INTEGER PRIMARY KEY,
            rollout_id TEXT NOT NULL UNIQUE,
            status TEXT NOT NULL,
            start_time REAL NOT NULL,
            end_time REAL,
            mode TEXT,
            resources_id TEXT,
            input TEXT NOT NULL,
            config TEXT NOT NULL,
            metadata TEXT,
            queue_pos INTEGER,
            attempt_count INTEGER NOT NULL DEFAULT 0,
            latest_attempt_id TEXT,
            timeout_seconds REAL,
            unresponsive_seconds REAL
        )""",
        # Only what the watchdog scans: active rollouts with a deadline (a full status index would
        # cost every enqueue, claim and finish one more page write).
        f"CREATE INDEX rollouts_watched ON rollouts(status) WHERE {WATCHED_ROLLOUTS}",
        "CREATE INDEX rollouts_queue ON rollouts(queue_pos) WHERE queue_pos IS NOT NULL",
        """CREATE TABLE attempts (
            rollout_id TEXT NOT NULL,
            attempt_id TEXT NOT NULL,
            sequence_id INTEGER NOT NULL,
            status TEXT NOT NULL,
            start_time REAL NOT NULL,
            end_time REAL,
            worker_id TEXT,
            last_heartbeat_time REAL,
            metadata TEXT,
            PRIMARY KEY (rollout_id, attempt_id)
        ) WITHOUT ROWID""",
        """CREATE TABLE spans (
            ord INTEGER PRIMARY KEY,
            rollout_id TEXT NOT NULL,
            attempt_id TEXT NOT NULL,
            span_id TEXT NOT NULL,
            sequence_id INTEGER NOT NULL,
            trace_id TEXT,
            parent_id TEXT,
            name TEXT,
            start_time REAL,
            end_time REAL,
            data TEXT NOT NULL
        )""",
        "CREATE UNIQUE INDEX spans_key ON spans(rollout_id, attempt_id, span_id)",
        "CREATE INDEX spans_by_sequence ON spans(rollout_id, sequence_id)",
        """CREATE TABLE span_counters (
            rollout_id TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """CREATE TABLE resources (
            ord INTEGER PRIMARY KEY,
            resources_id TEXT NOT NULL UNIQUE,
            create_time REAL NOT NULL,
            update_time REAL NOT NULL,
            version INTEGER NOT NULL,
            resources TEXT NOT NULL
        )""",
        """CREATE TABLE workers (
            ord INTEGER PRIMARY KEY,
            worker_id TEXT NOT NULL UNIQUE,
            status TEXT NOT NULL DEFAULT 'unknown',
            heartbeat_stats TEXT,
            last_heartbeat_time REAL,
            last_dequeue_time REAL,
            last_busy_time REAL,
            last_idle_time REAL,
            current_rollout_id TEXT,
            current_attempt_id TEXT
        )""",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    )
    for statement in statements:
        conn.execute(statement)


def _add_query_indexes_v2(conn: sqlite3.Connection) -> None:
    """Version 2: indexes that keep status filters and the start-time sort fast in a full store."""
    for statement in QUERY_INDEXES_V2:
        conn.execute(statement)


QUERY_INDEXES_V2 = (
    # ``query_rollouts(status_in=...)`` and its COUNT read only the matching rows.
    "CREATE INDEX rollouts_by_status ON rollouts(status)",
    # ``sort_by="start_time"`` (the dashboard's sort): the expression matches `order_by`'s NULLs-last term.
    "CREATE INDEX rollouts_by_start_time ON rollouts((start_time IS NULL), start_time)",
    # ``query_workers(status_in=...)``
    "CREATE INDEX workers_by_status ON workers(status)",
)
"""The statements of migration 2."""


def _add_row_counts_v3(conn: sqlite3.Connection) -> None:
    """Version 3: row counts of the rollouts and workers tables, kept by triggers."""
    for statement in ROW_COUNTS_V3:
        conn.execute(statement)


COUNTED_TABLES = ("rollouts", "workers")
"""Tables whose row count ``row_counts`` keeps: the total of an unfiltered query reads it instead of
counting every row (a ``count(*)`` walks a whole index: 5 ms at 100k rollouts)."""

ROW_COUNTS_V3 = (
    "CREATE TABLE row_counts (name TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID",
    *(f"INSERT INTO row_counts SELECT '{table}', count(*) FROM {table}" for table in COUNTED_TABLES),
    # No statement uses INSERT OR REPLACE on these tables (a REPLACE deletes without firing the delete
    # trigger); an upsert that updates fires neither.
    *(
        f"CREATE TRIGGER {table}_counted AFTER INSERT ON {table} "
        f"BEGIN UPDATE row_counts SET count = count + 1 WHERE name = '{table}'; END"
        for table in COUNTED_TABLES
    ),
    *(
        f"CREATE TRIGGER {table}_uncounted AFTER DELETE ON {table} "
        f"BEGIN UPDATE row_counts SET count = count - 1 WHERE name = '{table}'; END"
        for table in COUNTED_TABLES
    ),
)
"""The statements of migration 3."""


MIGRATIONS: dict[int, Migration] = {1: _create_v1, 2: _add_query_indexes_v2, 3: _add_row_counts_v3}
"""Version -> function upgrading a file from ``version - 1``; the highest key is the current version.

To change the schema, add ``MIGRATIONS[n + 1]``; never edit a released migration."""


def apply_migrations(conn: sqlite3.Connection, path: str, migrations: Mapping[int, Migration]) -> int:
    """Bring the database to the newest version in `migrations`; return the version it had before.

    Runs inside the caller's write transaction. Raises `SchemaVersionError` for a file newer than
    `migrations` know, or for a database that is not an agl store.
    """
    target = max(migrations)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id not in (0, APPLICATION_ID):
        raise SchemaVersionError(
            f"{path} is a SQLite database of another application (application_id={app_id:#x}), not an "
            "agl store. Point the store at a new file."
        )
    if version == 0 and app_id == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchone()
        if tables[0]:
            raise SchemaVersionError(
                f"{path} already holds tables that agl did not create, so it is not an agl store. "
                "Point the store at a new file."
            )
    if version > target:
        raise SchemaVersionError(
            f"{path} has store schema version {version}, but this agl only knows versions up to {target}. "
            "Upgrade agl-core to open it (downgrading a store file is not supported)."
        )
    for step in range(version + 1, target + 1):
        migrate = migrations.get(step)
        if migrate is None:
            raise SchemaVersionError(f"No migration to store schema version {step}; MIGRATIONS has a gap.")
        migrate(conn)
    if version != target:
        conn.execute(f"PRAGMA user_version = {int(target)}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    return int(version)


def configure_connection(conn: sqlite3.Connection, *, busy_timeout: float, in_memory: bool) -> None:
    """Per-connection settings: WAL, ``synchronous=NORMAL``, the busy timeout and cache sizes.

    WAL with ``synchronous=NORMAL`` writes every commit to the WAL file before COMMIT returns, so an
    acknowledged write survives the death of the process (not necessarily a power cut, which would
    need ``FULL`` and an fsync per commit).
    """
    conn.execute(f"PRAGMA busy_timeout = {max(0, int(busy_timeout * 1000))}")
    if not in_memory:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(
                f"Could not switch the SQLite database to WAL mode (it reports {mode!r}); the store needs "
                "a local file system that supports shared memory (not a network share)."
            )
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA cache_size = -65536")
    conn.execute("PRAGMA temp_store = MEMORY")


QUICK_CHECK_SECONDS = 5.0
"""Longest time the integrity quick check at open may take; a bigger file is opened unchecked."""

_PROGRESS_OPS = 10_000


def recovery_hint(path: str) -> str:
    """The commands that salvage what a damaged store file still holds."""
    return (
        f"keep the damaged file, then recover into a new one: sqlite3 {path} .recover | sqlite3 "
        f"{path}.recovered.db  and serve the recovered file (see docs/guarantees.md)"
    )


def is_corruption(exc: BaseException) -> bool:
    """True for SQLite's "database disk image is malformed" / "file is not a database" errors."""
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def corrupt_error(path: str, detail: str) -> StoreCorruptError:
    """The error for a damaged store file, with the recovery commands."""
    return StoreCorruptError(f"The store file {path} is damaged ({detail}).", hint=recovery_hint(path))


def quick_check(conn: sqlite3.Connection, path: str, *, budget_seconds: float | None = None) -> bool:
    """Run ``PRAGMA quick_check`` for at most `budget_seconds` (default `QUICK_CHECK_SECONDS`); False if
    it ran out of time.

    Raises:
        StoreCorruptError: the check found damage.
    """
    deadline = time.monotonic() + (QUICK_CHECK_SECONDS if budget_seconds is None else budget_seconds)
    conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_OPS)
    try:
        rows = conn.execute("PRAGMA quick_check(5)").fetchall()
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc).lower():
            return False
        raise
    except sqlite3.DatabaseError as exc:
        raise corrupt_error(path, str(exc)) from exc
    finally:
        conn.set_progress_handler(None, 0)
    problems = [str(row[0]) for row in rows if str(row[0]).lower() != "ok"]
    if problems:
        raise corrupt_error(path, "; ".join(problems)[:300])
    return True


def _connect(path: str, *, busy_timeout: float, read_only: bool) -> sqlite3.Connection:
    target, uri = path, False
    if read_only and path != ":memory:":
        if not os.path.exists(path):
            raise StoreOpenError(
                f"No store file at {path}.",
                hint="check the path (a read-only command never creates a store)",
            )
        target, uri = f"file:{quote(path)}?mode=ro", True
    try:
        return sqlite3.connect(
            target,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=512,
            timeout=busy_timeout,
            uri=uri,
        )
    except sqlite3.Error as exc:
        raise StoreOpenError(
            f"Cannot open the SQLite store {path}: {exc}.",
            hint="check that the directory exists and is writable, or pick another path",
        ) from exc


def open_connection(
    path: str,
    *,
    busy_timeout: float,
    migrations: Mapping[int, Migration] | None = None,
    read_only: bool = False,
    check_integrity: bool = True,
) -> sqlite3.Connection:
    """Open `path` (``":memory:"`` for a private in-memory database), check, configure and migrate it.

    The connection is in autocommit mode (``isolation_level=None``): the caller manages transactions.
    `read_only` opens an existing file without writing to it (a missing file is an error).

    Raises:
        StoreOpenError: the file cannot be opened (missing in read-only mode, unwritable path).
        StoreCorruptError: the file is damaged (found by a quick check bounded in time).
    """
    in_memory = path == ":memory:"
    conn = _connect(path, busy_timeout=busy_timeout, read_only=read_only)
    steps = MIGRATIONS if migrations is None else migrations
    try:
        if not in_memory and check_integrity:
            quick_check(conn, path)
        if read_only:
            conn.execute(f"PRAGMA busy_timeout = {max(0, int(busy_timeout * 1000))}")
            return conn
        configure_connection(conn, busy_timeout=busy_timeout, in_memory=in_memory)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if version != max(steps) or app_id != APPLICATION_ID:  # else: current, no write lock needed
            conn.execute("BEGIN IMMEDIATE")
            try:
                apply_migrations(conn, path, steps)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except BaseException as exc:
        conn.close()
        if is_corruption(exc):
            raise corrupt_error(path, str(exc)) from exc
        if isinstance(exc, sqlite3.OperationalError) and not in_memory:
            raise StoreOpenError(
                f"Cannot use the SQLite store {path}: {exc}.",
                hint="check that the file and its directory are writable",
            ) from exc
        raise
    return conn
