"""Logging setup for the ``agl_core`` logger hierarchy (Agent Lightning 0.3's ``agentlightning.logging``).

Everything agl logs is under the ``agl_core`` logger: the core's modules by module name, and each plugin
under the 0.3 name of the component it replaces (``agl_core.algorithm.apo``, ``agl_core.algorithm.verl``,
``agl_core.tracer.agentops``, ``agl_core.store.mongo``, ...; see docs/migrating-from-agent-lightning.md).
So a handler attached to ``agl_core`` — or to the renamed 0.3 logger of a component — receives those
records, and ``setup`` configures all of them at once.

Logger names passed here may use 0.3's ``agentlightning`` prefix; it is read as ``agl_core``. Handlers that
0.3 code attaches to ``agentlightning.*`` loggers directly receive the records of the same-named
``agl_core.*`` loggers (`agl_core._log_bridge.AgentLightningLogBridge`).
"""

from __future__ import annotations

import logging
import logging.config
import os
import platform
import sys
import warnings
from typing import Any

__all__ = ["configure_logger", "setup", "setup_module"]

BASE_LOGGER = "agl_core"
"""Name of the logger every agl component logs under."""

DEFAULT_FORMAT = "%(asctime)s [%(levelname)s] (Process-%(process)d %(name)s)   %(message)s"
"""Record format of the plain (``color=False``) console handler and of file handlers."""

DATE_FORMAT = "%H:%M:%S"
"""Time format of the plain console handler and of file handlers."""

_LEGACY_PREFIX = "agentlightning"


def logger_name(name: str) -> str:
    """``name`` with Agent Lightning 0.3's ``agentlightning`` prefix replaced by ``agl_core``."""
    if name == _LEGACY_PREFIX or name.startswith(_LEGACY_PREFIX + "."):
        return BASE_LOGGER + name[len(_LEGACY_PREFIX) :]
    return name


def _level_value(level: int | str) -> int:
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.upper())
    if not isinstance(value, int):
        raise ValueError(
            f"Unknown log level {level!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL, or an int."
        )
    return value


def _console_handler(color: bool | dict[str, Any]) -> dict[str, Any]:
    """A ``dictConfig`` handler entry: rich when ``color`` (a dict gives RichHandler options), else plain."""
    if color:
        options = dict(color) if isinstance(color, dict) else {}
        entry: dict[str, Any] = {"()": _rich_handler, "options": options}
        return entry
    return {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stdout"}


def _rich_handler(options: dict[str, Any]) -> logging.Handler:
    from rich.console import Console
    from rich.logging import RichHandler

    settings: dict[str, Any] = {"rich_tracebacks": False, "show_path": False}
    settings.update(options)
    if "console" not in settings and not sys.stdout.isatty():
        settings["console"] = Console(width=200)
    return RichHandler(**settings)


def setup_module(
    level: int | str = "INFO",
    *,
    name: str = BASE_LOGGER,
    console: bool = True,
    color: bool | dict[str, Any] = True,
    propagate: bool = False,
    disable_existing_loggers: bool = False,
) -> logging.Logger:
    """Configure the logger ``name`` (default ``agl_core``) with one console handler and return it.

    Args:
        level: level of the logger and of its console handler (int or name such as ``"INFO"``).
        name: logger to configure; ``agentlightning...`` is read as ``agl_core...``.
        console: attach a console handler (replacing the handlers the logger had).
        color: a rich handler when true (a dict gives ``RichHandler`` options), plain text otherwise.
        propagate: let records also reach the ancestors of ``name``.
        disable_existing_loggers: passed to :func:`logging.config.dictConfig`.
    """
    name = logger_name(name)
    level_value = _level_value(level)
    handlers: dict[str, Any] = {}
    if console:
        handlers["console"] = {**_console_handler(color), "level": level_value}
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": disable_existing_loggers,
            "formatters": {"plain": {"format": DEFAULT_FORMAT, "datefmt": DATE_FORMAT}},
            "handlers": handlers,
            "loggers": {name: {"level": level_value, "handlers": list(handlers), "propagate": propagate}},
        }
    )
    if name == BASE_LOGGER:
        from agl_core._log_bridge import install_log_bridge

        install_log_bridge()  # dictConfig replaced agl_core's handlers, the 0.3 logger bridge among them
    return logging.getLogger(name)


def _add_file_handler(
    logger: logging.Logger, filename: str, level: int, formatter: logging.Formatter | None
) -> None:
    path = os.path.abspath(filename)
    for handler in logger.handlers:
        if isinstance(handler, logging.FileHandler) and handler.baseFilename == path:
            return
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(level)
    handler.setFormatter(formatter or logging.Formatter(DEFAULT_FORMAT, DATE_FORMAT))
    logger.addHandler(handler)


def setup(
    level: int | str = "INFO",
    *,
    console: bool = True,
    color: bool | dict[str, Any] = True,
    propagate: bool = False,
    disable_existing_loggers: bool = False,
    capture_warnings: bool = False,
    submodule_levels: dict[str, int | str] | None = None,
    extra_handlers: list[logging.Handler] | None = None,
    formatter: logging.Formatter | None = None,
    apply_to: list[str] | None = None,
    files: str | dict[str, str] | None = None,
) -> None:
    """Configure logging for everything agl logs (the ``agl_core`` hierarchy, plugins included).

    Exported as ``agl_core.setup_logging``. The root logger and other libraries' loggers are left alone
    unless named in ``apply_to``.

    Args:
        level: level of the ``agl_core`` logger.
        console: attach a console handler.
        color: rich console output when true (a dict gives ``RichHandler`` options), plain text otherwise.
        propagate: let ``agl_core`` records reach the root logger too.
        disable_existing_loggers: passed to :func:`logging.config.dictConfig`.
        capture_warnings: route :mod:`warnings` into logging.
        submodule_levels: logger name -> level, e.g. ``{"agl_core.store": "DEBUG"}``; a level more
            verbose than ``level`` is applied and a warning says handlers may still filter it.
        extra_handlers: handlers added to ``agl_core`` (once each).
        formatter: set on the ``agl_core`` handlers that have none, and on file handlers.
        apply_to: other loggers that get copies of ``agl_core``'s handlers and level (and stop
            propagating, so records are not printed twice).
        files: one log file for the whole hierarchy, or a mapping logger name -> file.
    """
    if platform.system() == "Windows":
        os.environ["PYTHONUTF8"] = "1"
    base = setup_module(
        level,
        name=BASE_LOGGER,
        console=console,
        color=color,
        propagate=propagate,
        disable_existing_loggers=disable_existing_loggers,
    )
    if formatter is not None:
        for handler in base.handlers:
            if handler.formatter is None:
                handler.setFormatter(formatter)
    for handler in extra_handlers or []:
        if handler not in base.handlers:
            base.addHandler(handler)
    for name, sub_level in (submodule_levels or {}).items():
        value = _level_value(sub_level)
        if value < base.level:
            base.warning(
                "Logger %r is set to %s, more verbose than the base level %s; handlers may still drop the "
                "extra records.",
                logger_name(name),
                logging.getLevelName(value),
                logging.getLevelName(base.level),
            )
        logging.getLogger(logger_name(name)).setLevel(value)
    if isinstance(files, str):
        _add_file_handler(base, files, base.level, formatter)
    elif files is not None:
        for name, filename in files.items():
            target = logging.getLogger(logger_name(name))
            _add_file_handler(target, filename, target.getEffectiveLevel(), formatter)
    for name in apply_to or []:
        target = logging.getLogger(logger_name(name))
        target.handlers.clear()
        for handler in base.handlers:
            target.addHandler(handler)
        target.setLevel(base.level)
        target.propagate = False
    if capture_warnings:
        logging.captureWarnings(True)


def configure_logger(level: int = logging.INFO, name: str = BASE_LOGGER) -> logging.Logger:
    """Deprecated (as in Agent Lightning 0.3): use :func:`setup` (``agl_core.setup_logging``).

    Configures one logger with a console handler, like :func:`setup_module`.
    """
    warnings.warn(
        "This function is deprecated in favor of `setup_logging`.", DeprecationWarning, stacklevel=2
    )
    return setup_module(level=level, name=name, console=True, color=True, propagate=False)
