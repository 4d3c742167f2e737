"""Former name of :mod:`agl_core.adapter.genai` (kept so existing imports keep working)."""

from agl_core.adapter.genai import *  # noqa: F403
from agl_core.adapter.genai import __all__  # noqa: F401
