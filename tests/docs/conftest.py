"""Helpers of the documentation tests: the docs folder and the site's build hooks (tools/docs_site.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS_DIR = REPO_ROOT / "docs"


@pytest.fixture(scope="session")
def docs_site() -> ModuleType:
    """The build-hook module, imported from its file (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("agl_docs_site", REPO_ROOT / "tools" / "docs_site.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
