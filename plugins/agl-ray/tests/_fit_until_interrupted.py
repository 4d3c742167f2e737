"""Driver for the Ctrl-C test: ``python _fit_until_interrupted.py STORE_DB MARKER_DIR``.

Starts its own local Ray, fits two actors on stalling rollouts against a SQLite store, and prints
``FIT RETURNED`` when ``fit`` returns after SIGINT.
"""

from __future__ import annotations

import sys

import ray
from _agents import EnqueueAndWait, stalling_agent

import agl_core as agl


def main() -> None:
    """Fit until interrupted."""
    store_db, marker_dir = sys.argv[1], sys.argv[2]
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="WARNING")
    strategy = {
        "type": "ray",
        "n_runners": 2,
        "runner_resources": {"CPU": 0.25},
        "server_host": "127.0.0.1",
        "graceful_timeout": 3.0,
    }
    tasks = [{"n": n, "stall": True, "marker": f"{marker_dir}/{n}.pid"} for n in range(6)]
    trainer = agl.Trainer(
        strategy=strategy, store=f"sqlite:///{store_db}", algorithm=EnqueueAndWait(), progress=False
    )
    trainer.fit(stalling_agent, tasks)
    print("FIT RETURNED", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
