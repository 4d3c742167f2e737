"""asyncpg versus psycopg 3 (async pool) on the store's statement shapes; prints JSON (calls/s).

Not part of the tests: ``pip install 'psycopg[binary,pool]'`` into the plugin's venv, then
``python tools/driver_bench.py [--count N]``. Each driver runs, against a throwaway cluster, the three
shapes that dominate the store: a single-row INSERT ... RETURNING (enqueue), a primary-key read
(get_rollout_by_id) and a queue claim (CTE with FOR UPDATE SKIP LOCKED + UPDATE + INSERT), by one
task and by 16 tasks sharing a pool of 16 connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import psycopg_pool
from agl_postgres.testing import PgCluster

SETUP = """
DROP TABLE IF EXISTS q, a;
CREATE TABLE q (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k text UNIQUE, v text, pos bigint);
CREATE INDEX q_pos ON q (pos) WHERE pos IS NOT NULL;
CREATE TABLE a (k text, n int, PRIMARY KEY (k, n));
"""
INSERT = "INSERT INTO q (k, v, pos) VALUES ({0}, {1}, nextval('q_id_seq')) RETURNING id"
READ = "SELECT id, k, v FROM q WHERE k = {0}"
CLAIM = (
    "WITH h AS (SELECT id FROM q WHERE pos IS NOT NULL ORDER BY pos LIMIT 1 FOR UPDATE SKIP LOCKED), "
    "c AS (UPDATE q SET pos = NULL FROM h WHERE q.id = h.id RETURNING q.k), "
    "i AS (INSERT INTO a (k, n) SELECT k, {0} FROM c) SELECT k FROM c"
)


async def timed(tasks: int, count: int, one: Callable[[int], Awaitable[Any]]) -> float:
    async def worker(w: int) -> None:
        for i in range(w, count, tasks):
            await one(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(tasks)))
    return round(count / (time.perf_counter() - start), 1)


async def _no_reset(conn: Any) -> None:
    """The store's pool release hook: no RESET round trip (psycopg's pool sends none either)."""


async def run_asyncpg(uri: str, count: int, tasks: int) -> dict[str, float]:
    pool = await asyncpg.create_pool(uri, min_size=tasks, max_size=tasks, reset=_no_reset)
    await pool.execute(SETUP)
    ins, read, claim = (s.format("$1::text", "$2::text") for s in (INSERT, READ, CLAIM.replace("{0}", "1")))
    out = {
        "insert": await timed(tasks, count, lambda i: pool.fetchval(ins, f"k{i}", "x" * 200)),
        "read": await timed(tasks, count, lambda i: pool.fetchrow(read, f"k{i}")),
        "claim": await timed(tasks, count, lambda i: pool.fetchval(claim)),
    }
    await pool.close()
    return out


async def run_psycopg(uri: str, count: int, tasks: int) -> dict[str, float]:
    pool = psycopg_pool.AsyncConnectionPool(
        uri, min_size=tasks, max_size=tasks, open=False, kwargs={"autocommit": True}
    )
    await pool.open()
    async with pool.connection() as conn:
        await conn.execute(SETUP)
    ins, read, claim = (s.format("%s", "%s") for s in (INSERT, READ, CLAIM.replace("{0}", "1")))

    async def call(sql: str, *args: Any) -> Any:
        async with pool.connection() as conn:
            cur = await conn.execute(sql, args or None, prepare=True)
            return await cur.fetchone()

    out = {
        "insert": await timed(tasks, count, lambda i: call(ins, f"k{i}", "x" * 200)),
        "read": await timed(tasks, count, lambda i: call(read, f"k{i}")),
        "claim": await timed(tasks, count, lambda i: call(claim)),
    }
    await pool.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    cluster = PgCluster().init().start()
    try:
        results: dict[str, Any] = {}
        for tasks in (1, 16):
            for name, runner in (("asyncpg", run_asyncpg), ("psycopg", run_psycopg)):
                results[f"{name}, {tasks} task(s)"] = await runner(cluster.uri, args.count, tasks)
        print(json.dumps(results, indent=2))
    finally:
        cluster.destroy()


if __name__ == "__main__":
    asyncio.run(main())
