"""Agent Lightning 0.3 code's ``agentlightning.*`` loggers get agl's records (see `AgentLightningLogBridge`).

A leaf module (it imports no agl_core module): ``import agl_core`` installs the bridge.
"""

from __future__ import annotations

import logging

__all__ = ["AgentLightningLogBridge", "install_log_bridge"]


class AgentLightningLogBridge(logging.Handler):
    """On the ``agl_core`` logger: gives records to the handlers of the same-named ``agentlightning`` loggers.

    0.3 code configures ``logging.getLogger("agentlightning.algorithm.apo")`` (a file handler, say); agl logs
    that component as ``agl_core.algorithm.apo``. This handler gives ``agl_core.x.y``'s record to the
    handlers of ``agentlightning.x.y``, ``agentlightning.x`` and ``agentlightning`` that exist (stopping where
    one does not propagate), as 0.3's own logger would have. The root logger is not among them: the record
    reaches it through ``agl_core`` as usual. Which records are made is decided by ``agl_core``'s levels
    (``agl.setup_logging`` reads ``agentlightning`` names as ``agl_core``).
    """

    def emit(self, record: logging.LogRecord) -> None:
        """Call the handlers of the existing ``agentlightning`` loggers on the record's 0.3 name."""
        if record.name != "agl_core" and not record.name.startswith("agl_core."):
            return  # a copy of agl_core's handlers on another logger (setup_logging's apply_to)
        name = "agentlightning" + record.name[len("agl_core") :]
        loggers = logging.Logger.manager.loggerDict
        origin = loggers.get(name)
        if isinstance(origin, logging.Logger) and record.levelno < origin.level:
            return  # the level of the record's own 0.3 logger, when set, decides (as it would have in 0.3)
        while True:
            logger = loggers.get(name)
            if isinstance(logger, logging.Logger):
                if logger.disabled:
                    return
                for handler in logger.handlers:
                    if record.levelno >= handler.level:
                        handler.handle(record)
                if not logger.propagate:
                    return
            if "." not in name:
                return
            name = name.rpartition(".")[0]


def install_log_bridge() -> None:
    """Attach one `AgentLightningLogBridge` to the ``agl_core`` logger (again when a setup replaced it)."""
    base = logging.getLogger("agl_core")
    if not any(isinstance(handler, AgentLightningLogBridge) for handler in base.handlers):
        base.addHandler(AgentLightningLogBridge())
