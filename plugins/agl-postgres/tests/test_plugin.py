"""agl-postgres as a plugin: listed, opened by both schemes, password hidden, migrations, plans, serve."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request

import asyncpg
import pytest
from agl_postgres import PostgresLightningStore, SchemaVersionError
from agl_postgres.testing import free_port

import agl_core
from agl_core.plugins import PluginManager
from agl_core.store import InvalidRequestError, open_store
from agl_testing import records_by_name, run_cli, use_plugin_manager


def _manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_plugin_is_listed_ok_with_both_schemes() -> None:
    """`agl plugins list --json` shows `postgres` from agl-postgres, ok, with both schemes."""
    result = run_cli("plugins", "list", "--json", manager=_manager())
    assert result.exit_code == 0, result.stderr
    record = records_by_name(result.json())["postgres"]
    assert (record["status"], record["distribution"], record["version"]) == (
        "ok",
        "agl-postgres",
        agl_core.__version__,
    )
    (store,) = [p for p in record["provides"] if p["kind"] == "store"]
    assert (store["name"], store["schemes"], store["available"]) == (
        "postgres",
        ["postgresql", "postgres"],
        True,
    )


def test_hooks_do_not_import_the_driver() -> None:
    """Listing plugins never imports asyncpg."""
    code = (
        "import sys; from agl_core.plugins import PluginManager; m = PluginManager(strict=True); "
        "m.load_entrypoints(); print('asyncpg' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"


def test_uri_options_and_keyword_arguments() -> None:
    """Both schemes open the store; pool and timeout options come from the query, keywords win."""
    with use_plugin_manager(_manager()):
        store = open_store(
            "postgresql://u:pw1@db:5432/agl?schema=exp7&pool_max_size=4&command_timeout=9&sslmode=disable"
        )
        assert isinstance(store, PostgresLightningStore)
        assert (store.schema, store.options["pool_max_size"], store.options["command_timeout"]) == (
            "exp7",
            4,
            9.0,
        )
        assert "pw1" not in repr(store) and "pw1" not in store.uri
        other = open_store("postgres://u@db/agl?pool_max_size=4", pool_max_size=20, schema="b")
        assert (other.options["pool_max_size"], other.schema) == (20, "b")  # type: ignore[attr-defined]
    for bad in (
        "?pool_max_size=zero",
        "?schema=Bad-Name",
        "?pool_min_size=5&pool_max_size=2",
        "?retry_timeout=-1",
    ):
        with pytest.raises(InvalidRequestError) as info:
            PostgresLightningStore(f"postgresql://u:pw2@db/agl{bad}")
        assert "pw2" not in str(info.value)
    with pytest.raises(InvalidRequestError, match="postgresql://"):
        PostgresLightningStore("mysql://db/agl")


async def test_schemas_isolate_deployments(postgres_uri: str, schema: str) -> None:
    """Two schemas in one database hold separate stores; the same schema is shared."""
    a = PostgresLightningStore(postgres_uri, schema=schema + "_a")
    b = PostgresLightningStore(postgres_uri, schema=schema + "_b")
    a2 = PostgresLightningStore(postgres_uri, schema=schema + "_a")
    try:
        rollout = await a.enqueue_rollout("x")
        assert await b.get_rollout_by_id(rollout.rollout_id) is None
        assert await a2.get_rollout_by_id(rollout.rollout_id) is not None
    finally:
        for store in (a, b, a2):
            await store.close()


async def test_migrate_command_dry_run_then_apply(postgres_uri: str, schema: str) -> None:
    """`agl postgres migrate --dry-run` lists the SQL and changes nothing; without it, applies once."""
    manager = _manager()
    uri = f"{postgres_uri}?schema={schema}"
    dry = await asyncio.to_thread(run_cli, "postgres", "migrate", "--dry-run", uri, manager=manager)
    assert dry.exit_code == 0, dry.stderr
    assert "1 migration(s) pending" in dry.output and "CREATE TABLE rollouts" in dry.output
    conn = await asyncpg.connect(postgres_uri)
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema) == 0
        applied = await asyncio.to_thread(run_cli, "postgres", "migrate", uri, manager=manager)
        assert applied.exit_code == 0 and "applied version 1" in applied.output
        again = await asyncio.to_thread(run_cli, "postgres", "migrate", uri, manager=manager)
        assert "nothing to apply" in again.output
        assert await conn.fetchval(f"SELECT max(version) FROM {schema}.schema_migrations") == 1
        await conn.execute(f"INSERT INTO {schema}.schema_migrations (version, name) VALUES (99, 'future')")
        with pytest.raises(SchemaVersionError, match="version 99"):
            await PostgresLightningStore(uri).get_latest_resources()
        await conn.execute(f"CREATE SCHEMA {schema}_foreign; CREATE TABLE {schema}_foreign.t (x int)")
        with pytest.raises(SchemaVersionError, match="not an agl store"):
            await PostgresLightningStore(postgres_uri, schema=f"{schema}_foreign").get_latest_resources()
    finally:
        await conn.close()


async def test_hot_queries_use_indexes(postgres_uri: str, schema: str) -> None:
    """EXPLAIN of every hot query (seq scans off, as on a big table) shows an index, no Seq Scan."""
    from agl_postgres import ops, reads, spans

    store = PostgresLightningStore(postgres_uri, schema=schema)
    await store.get_latest_resources()  # migrates
    conn = await asyncpg.connect(
        postgres_uri, server_settings={"search_path": schema, "enable_seqscan": "off"}
    )
    decided = ops.status_decision("succeeded")
    assert decided is not None
    try:
        hot = {
            "queue head (claim)": (ops._CLAIM, 1, ["at-1"], 0.0, None, "t"),
            "claim retry by token": (ops._CLAIMED_BY_TOKEN, "t"),
            "attempt state": (ops._ATTEMPT_STATE, "ro-1", None),
            "attempt update in one statement": (
                ops._DECIDED_UPDATE.format(assignments="status = $6::text", worker=""),
                "ro-1",
                None,
                decided[0],
                [None] * len(decided[0]),
                decided[1],
                "succeeded",
            ),
            "enqueue one": (ops._ENQUEUE_ONE, "ro-1", 0.0, None, None, "{}", "{}", None, None, None),
            "watchdog": (ops._UNHEALTHY, 0.0),
            "rollout spans": (
                "SELECT data FROM spans WHERE rollout_id = $1::text ORDER BY sequence_id, ord",
                "r",
            ),
            "sequence id": (spans._NEXT_ID, "ro-1"),
            "rollout by id": (reads._WITH_LATEST + " WHERE r.rollout_id = $1::text", "ro-1"),
            "worker by id": ("SELECT * FROM workers WHERE worker_id = $1::text", "w"),
        }
        for name, (sql, *args) in hot.items():
            async with conn.transaction():  # EXPLAIN ANALYZE of a write is rolled back
                plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *args))
            assert "Seq Scan" not in plan, f"{name}:\n{plan}"
            assert "Index" in plan, f"{name}:\n{plan}"
    finally:
        await conn.close()
        await store.close()


def test_agl_store_serve_on_postgres(postgres_uri: str, schema: str) -> None:
    """`agl store serve --store postgresql://...` serves the store over HTTP."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agl_core.cli",
            "store",
            "serve",
            "--store",
            f"{postgres_uri}?schema={schema}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "AGL_PLUGINS_STRICT": "1"},
    )
    try:
        from agl_core.store.http import LightningStoreClient

        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/agl/health", timeout=2)
                break
            except OSError:
                assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)

        async def roundtrip() -> None:
            client = LightningStoreClient(f"http://127.0.0.1:{port}")
            try:
                queued = await client.enqueue_rollout({"q": 1})
                claimed = await client.dequeue_rollout(worker_id="http-runner")
                assert claimed is not None and claimed.rollout_id == queued.rollout_id
            finally:
                await client.close()
            direct = PostgresLightningStore(postgres_uri, schema=schema)
            try:
                assert (await direct.get_rollout_by_id(queued.rollout_id)).status == "preparing"  # type: ignore[union-attr]
            finally:
                await direct.close()

        asyncio.run(roundtrip())
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_one_statement_attempt_updates_decide_like_logic() -> None:
    """The decision tables of one-statement attempt updates agree with `logic` for every state and config;
    statuses whose effect depends on retries get no table (they read first)."""
    from agl_postgres import ops

    from agl_core.store import logic
    from agl_core.types import RolloutConfig
    from agl_core.types.status import ATTEMPT_STATUSES, ROLLOUT_STATUSES

    configs = [RolloutConfig(), RolloutConfig(max_attempts=3, retry_condition=["failed", "timeout"])]
    for status in ATTEMPT_STATUSES:
        decision = ops.status_decision(status)
        if status in ("failed", "timeout", "unresponsive"):
            assert decision is None, status
            continue
        assert decision is not None, status
        table, queued = decision
        for i, rollout_status in enumerate(ROLLOUT_STATUSES):
            for is_latest in (False, True):
                expected = {
                    logic.next_rollout_status(rollout_status, config, seq, status, is_latest=is_latest)
                    for config in configs
                    for seq in (1, 2, 5)
                }
                assert expected == {table[2 * i + is_latest]}, (status, rollout_status, is_latest)
                assert queued[2 * i + is_latest] == (
                    table[2 * i + is_latest] is not None and logic.should_enqueue(table[2 * i + is_latest])
                )
