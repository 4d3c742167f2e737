"""Agent Lightning 0.3's ``agentlightning.instrumentation.vllm``.

Served at ``agl_core.instrumentation.vllm``; listed in docs/migrating-from-agent-lightning.md. 0.3
patched vLLM's OpenAI server to return prompt and response token ids; vLLM does this itself since 0.10.2
(request ``return_token_ids``), which is what agl's LLM proxy asks for. So `instrument_vllm` checks that
the installed vLLM is new enough and changes nothing; with an older vLLM it raises an error saying to
upgrade. Needs ``pip install 'vllm>=0.10.2'``.
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

from agl_core._compat import NotProvidedError, import_required

__all__ = ["instrument_vllm", "uninstrument_vllm"]

logger = logging.getLogger(__name__)

NATIVE_TOKEN_IDS_VERSION = Version("0.10.2")
"""The first vLLM release that returns token ids itself."""


def instrument_vllm() -> None:
    """Check that vLLM returns token ids natively (>= 0.10.2); else `NotProvidedError` naming the upgrade."""
    import_required("vllm", "instrument_vllm", "'vllm>=0.10.2'")
    try:
        installed = Version(version("vllm"))
    except PackageNotFoundError as exc:
        raise NotProvidedError("instrument_vllm needs vllm: pip install 'vllm>=0.10.2'") from exc
    if installed.release < NATIVE_TOKEN_IDS_VERSION.release:
        raise NotProvidedError(
            f"vllm {installed} does not return token ids and agl does not patch it: "
            "pip install 'vllm>=0.10.2' (then requests with return_token_ids get them)."
        )
    logger.debug("vllm %s returns token ids natively; nothing to instrument.", installed)


def uninstrument_vllm() -> None:
    """Nothing to undo: `instrument_vllm` changes nothing."""
