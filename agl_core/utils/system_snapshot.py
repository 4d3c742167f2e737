"""A small, JSON-ready snapshot of the host and process, sent with runner heartbeats.

``psutil`` is optional: without it the snapshot still has the host, the process id, the load average and
the CPU count. GPU figures come from ``pynvml`` (``nvidia-ml-py``) when it is installed and asked for.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import time
from typing import Any

__all__ = ["system_snapshot"]

_MB = 1024 * 1024


def _psutil_figures() -> dict[str, Any]:
    try:
        import psutil
    except ImportError:
        return {}
    memory = psutil.virtual_memory()
    process = psutil.Process()
    with process.oneshot():
        rss = process.memory_info().rss
        threads = process.num_threads()
        process_cpu = process.cpu_percent(interval=None)
    return {
        "cpu_percent": psutil.cpu_percent(interval=None),
        "memory_percent": memory.percent,
        "memory_used_mb": round(memory.used / _MB, 1),
        "memory_total_mb": round(memory.total / _MB, 1),
        "process_rss_mb": round(rss / _MB, 1),
        "process_cpu_percent": process_cpu,
        "process_threads": threads,
    }


def _gpu_figures() -> list[dict[str, Any]]:
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:
        return []
    gpus: list[dict[str, Any]] = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            utilization = pynvml.nvmlDeviceGetUtilizationRates(handle)
            gpus.append(
                {
                    "index": index,
                    "utilization_percent": utilization.gpu,
                    "memory_used_mb": round(memory.used / _MB, 1),
                    "memory_total_mb": round(memory.total / _MB, 1),
                }
            )
    except Exception:  # a driver error mid-way: report the GPUs read so far
        return gpus
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return gpus


def system_snapshot(include_gpu: bool = False) -> dict[str, Any]:
    """Host, process, CPU and memory figures (and GPUs when ``include_gpu``) as a JSON-ready dict.

    Never raises for a missing optional dependency; figures that cannot be read are left out.
    """
    snapshot: dict[str, Any] = {
        "timestamp": time.time(),
        "hostname": socket.gethostname(),
        "platform": platform.system(),
        "pid": os.getpid(),
        "cpu_count": os.cpu_count(),
    }
    with contextlib.suppress(AttributeError, OSError):
        snapshot["load_average"] = list(os.getloadavg())
    snapshot.update(_psutil_figures())
    if include_gpu:
        snapshot["gpus"] = _gpu_figures()
    return snapshot
