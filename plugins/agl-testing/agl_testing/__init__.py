"""agl's test kit for agl itself and its plugins (``pip install agl-testing``).

Installing it gives pytest the ``plugin_manager`` fixture (:mod:`agl_testing.fixtures`, a ``pytest11``
plugin; it is no agl plugin). Helpers: :func:`register_plugin`, :func:`plugin_module`,
:func:`fake_entry_point`, :func:`run_cli`, :func:`use_plugin_manager`. The store conformance suite is
:mod:`agl_testing.store_conformance`, the fake OpenAI/Anthropic server :mod:`agl_testing.fake_openai`, the
Markdown code-block runner :mod:`agl_testing.doc_blocks`. Importing the helpers does not import pytest.
"""

from agl_testing.plugins import (
    CliResult,
    FakeDistribution,
    FakeEntryPoint,
    fake_entry_point,
    plugin_module,
    records_by_name,
    register_plugin,
    run_cli,
    use_plugin_manager,
)

__all__ = [
    "CliResult",
    "FakeDistribution",
    "FakeEntryPoint",
    "fake_entry_point",
    "plugin_module",
    "records_by_name",
    "register_plugin",
    "run_cli",
    "use_plugin_manager",
]
