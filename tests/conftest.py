"""Core test configuration: tests never autoload entry points; they build fresh managers."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

pytest_plugins = ["agl_core.testing"]
