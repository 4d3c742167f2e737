"""Agents that are programs: run a command per attempt with its LLM routed through the agl proxy.

See docs/programs.md ("Bring a program").
"""

from agl_core.program.agent import (
    DUMMY_API_KEY,
    PROGRAM_SPAN,
    ProgramAgent,
    ProgramFailedError,
    ProgramOutcome,
    RewardHook,
)
from agl_core.program.launcher import LocalLauncher, ProgramExit, ProgramLaunch, ProgramLauncher
from agl_core.program.reward import ProgramRewardError
from agl_core.program.rollout_hooks import HookedStore, RolloutHooks
from agl_core.program.values import ProgramValueError
from agl_core.program.workdir import WorkFolderError

__all__ = [
    "DUMMY_API_KEY",
    "PROGRAM_SPAN",
    "HookedStore",
    "LocalLauncher",
    "ProgramAgent",
    "ProgramExit",
    "ProgramFailedError",
    "ProgramLaunch",
    "ProgramLauncher",
    "ProgramOutcome",
    "ProgramRewardError",
    "ProgramValueError",
    "RewardHook",
    "RolloutHooks",
    "WorkFolderError",
]
