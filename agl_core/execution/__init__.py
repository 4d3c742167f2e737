"""Execution strategies: how the algorithm and the runners of a training run are laid out.

* `SharedMemoryExecutionStrategy` (``"shm"``): threads of one process sharing one store object.
* `ClientServerExecutionStrategy` (``"cs"``): the algorithm serves the store over HTTP; runners are
  processes (local children, or ``agl runner`` on other machines).

Both register through the ``agl_register_strategies`` hook like any plugin's strategy (``"ray"`` from
agl-ray); ``Trainer(strategy=<name>)`` looks names up in the ``"strategy"`` registry.
"""

from agl_core.execution.base import AlgorithmBundle, ExecutionStrategy, RunnerBundle
from agl_core.execution.client_server import ClientServerExecutionStrategy
from agl_core.execution.events import ExecutionEvent, MultiprocessingEvent, ThreadingEvent
from agl_core.execution.shared_memory import SharedMemoryExecutionStrategy

__all__ = [
    "AlgorithmBundle",
    "ClientServerExecutionStrategy",
    "ExecutionEvent",
    "ExecutionStrategy",
    "MultiprocessingEvent",
    "RunnerBundle",
    "SharedMemoryExecutionStrategy",
    "ThreadingEvent",
]
