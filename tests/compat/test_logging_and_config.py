"""0.3's logging helpers, used as 0.3 scripts use them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import agl_core as agl


@pytest.fixture(autouse=True)
def _restore_agl_logger() -> Iterator[None]:
    logger = logging.getLogger("agl_core")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_setup_logging_configures_the_agl_hierarchy_plugins_included(tmp_path: Path) -> None:
    collect = Collect()
    log_file = tmp_path / "agl.log"
    agl.setup_logging("DEBUG", color=False, extra_handlers=[collect], files=str(log_file))
    logging.getLogger("agl_core.store.memory").debug("core record")
    logging.getLogger("agl_core.algorithm.apo.search").info("plugin record")  # agl-apo's logger name
    logging.getLogger("unrelated").warning("not ours")
    assert [r.getMessage() for r in collect.records] == ["core record", "plugin record"]
    assert "plugin record" in log_file.read_text()


def test_submodule_levels_accept_03_logger_names() -> None:
    collect = Collect()
    agl.setup_logging(
        "INFO", color=False, extra_handlers=[collect], submodule_levels={"agentlightning.store": "ERROR"}
    )
    logging.getLogger("agl_core.store.memory").warning("quiet")
    logging.getLogger("agl_core.runner").warning("loud")
    assert [r.getMessage() for r in collect.records] == ["loud"]
    logging.getLogger("agl_core.store").setLevel(logging.NOTSET)


def test_setup_module_logging_and_deprecated_configure_logger() -> None:
    logger = agl.setup_module_logging("WARNING", name="agentlightning", color=False)
    assert logger.name == "agl_core" and logger.level == logging.WARNING and not logger.propagate
    with pytest.warns(DeprecationWarning, match="setup_logging"):
        legacy = agl.configure_logger(level=logging.INFO)
    assert legacy.name == "agl_core" and legacy.level == logging.INFO
