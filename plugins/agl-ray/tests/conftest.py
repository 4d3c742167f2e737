"""A local Ray instance (2 CPUs) shared by the tests; actors import test helpers from this folder."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# A suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and so
# would every process it starts; the Ctrl-C test stops its child with SIGINT and needs the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    """``ray.init(num_cpus=2)`` on loopback only, with this folder on the actors' PYTHONPATH."""
    import ray

    paths = [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        logging_level="WARNING",
        log_to_driver=True,
    )
    try:
        yield
    finally:
        ray.shutdown()
