"""The site's build hooks (tools/docs_site.py) generate complete reference pages from the code itself."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from agl_core.cli import build_cli
from agl_core.store.http.openapi import openapi_document
from tests.docs.conftest import DOCS_DIR, REPO_ROOT


def test_rest_reference_has_every_operation_and_schema(docs_site: ModuleType) -> None:
    document = openapi_document()
    page = docs_site.openapi_markdown(document)
    for path, methods in document["paths"].items():
        for method in methods:
            assert f"### `{method.upper()} {path}`" in page
    for name in document["components"]["schemas"]:
        assert f"### `{name}`" in page
    # every schema link points at an anchor the page defines
    for anchor in set(docs_site.re.findall(r"\]\(#(schema-[a-z0-9-]+)\)", page)):
        assert f"{{ #{anchor} }}" in page, anchor


def test_cli_reference_has_every_builtin_command_and_option(docs_site: ModuleType) -> None:
    page = docs_site.cli_markdown(build_cli())
    for heading in (
        "## `agl`",
        "## `agl store serve`",
        "## `agl runner`",
        "## `agl doctor`",
        "## `agl plugins list`",
    ):
        assert heading in page
    assert "`--server-timeout FLOAT RANGE`" in page or "--server-timeout" in page
    assert "ROLLOUT_ID" in page


def test_each_plugin_readme_becomes_a_page_named_in_the_nav(docs_site: ModuleType) -> None:
    readmes = docs_site.plugin_readmes()
    assert readmes == {p.parent.name: p for p in sorted(REPO_ROOT.glob("plugins/agl-*/README.md"))}
    nav = nav_pages()
    for name in readmes:
        assert f"plugins/{name}.md" in nav, f"add plugins/{name}.md to the nav of mkdocs.yml"


def test_a_plugin_page_is_its_readme_unchanged(docs_site: ModuleType) -> None:
    # one source: the site shows the README (whose blocks the plugin's suite runs), never a copy
    assert not list((DOCS_DIR / "plugins").glob("*.md")), "plugin pages are generated from their READMEs"
    pages = docs_site.generated_pages()
    for name, readme in docs_site.plugin_readmes().items():
        assert pages[f"plugins/{name}.md"] == readme.read_text(encoding="utf-8")


def nav_pages() -> set[str]:
    """The pages the nav of mkdocs.yml names (``- Title: path.md`` lines)."""
    text = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return set(re.findall(r"^\s*- [^:\n]+: (\S+\.md)$", text, re.MULTILINE))


def test_every_docs_page_is_in_the_nav() -> None:
    nav = nav_pages()
    for page in DOCS_DIR.rglob("*.md"):
        assert page.relative_to(DOCS_DIR).as_posix() in nav, f"add {page.name} to the nav of mkdocs.yml"


def test_changelog_page_uses_the_changelog_or_says_there_is_none(
    docs_site: ModuleType, tmp_path: Path
) -> None:
    assert docs_site.changelog_page(tmp_path) == docs_site.CHANGELOG_MISSING
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n\n## 0.4.0\n", encoding="utf-8")
    assert docs_site.changelog_page(tmp_path) == "# Changelog\n\n## 0.4.0\n"


def test_include_section_copies_one_section_and_names_the_missing_one(
    docs_site: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "a.md").write_text(
        "# A\n\n## Speed\n\n| x |\n|---|\n\n```bash\n## not a heading\n```\n\n## Other\n\nno\n",
        encoding="utf-8",
    )
    page = "intro\n<!-- include-section: a.md#speed -->\nend\n"
    out = docs_site.include_sections(page, tmp_path)
    assert out == "intro\n| x |\n|---|\n\n```bash\n## not a heading\n```\n\nend\n"
    with pytest.raises(LookupError, match="speed, other"):
        docs_site.include_sections("<!-- include-section: a.md#missing -->", tmp_path)


def test_benchmarks_page_includes_the_store_table(docs_site: ModuleType) -> None:
    page = docs_site.include_sections((DOCS_DIR / "benchmarks.md").read_text(encoding="utf-8"), DOCS_DIR)
    assert "| `http-memory-1` |" in page


def test_links_to_a_plugin_readme_point_at_its_page(docs_site: ModuleType) -> None:
    text = "see [README](../plugins/agl-postgres/README.md) and [x](../plugins/agl-mongo/README.md#setup)"
    assert docs_site.rewrite_repository_links(text) == (
        "see [README](plugins/agl-postgres.md) and [x](plugins/agl-mongo.md#setup)"
    )


def test_offline_check_names_each_external_asset(docs_site: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "ok.html").write_text('<script src="assets/a.js"></script><a href="https://x.org">x</a>')
    (tmp_path / "bad.html").write_text(
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
        "<script src='//cdn.example/x.js'></script>"
    )
    found = docs_site.external_assets(tmp_path)
    assert len(found) == 2 and all(line.startswith("bad.html: ") for line in found)
    assert docs_site.main(["check-offline", str(tmp_path)]) == 1
    (tmp_path / "bad.html").unlink()
    assert docs_site.main(["check-offline", str(tmp_path)]) == 0
