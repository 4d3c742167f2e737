"""Build hooks of the documentation site (``mkdocs.yml`` -> ``hooks:``); no network, no extra packages.

At build time they add generated pages to the site:

- ``reference/rest-api.md`` from the store's OpenAPI document (:func:`openapi_markdown`);
- ``reference/cli.md`` from the ``agl`` click commands (:func:`cli_markdown`);
- ``plugins/<name>.md`` from each ``plugins/*/README.md``;
- ``changelog.md`` from ``CHANGELOG.md`` when the repository has one (else a page that says so).

The Markdown generators are plain functions (tested in ``tests/docs``); only the ``on_*`` events touch MkDocs.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import click

REPO_ROOT = Path(__file__).resolve().parent.parent
_METHOD_ORDER = ("get", "post", "put", "patch", "delete")
_INCLUDE_SECTION = re.compile(r"^<!-- include-section: ([\w./-]+)#([\w-]+) -->$", re.MULTILINE)
_PLUGIN_README_LINK = re.compile(r"\]\((?:\.\./)+plugins/(agl-[\w-]+)/README\.md(#[^)]*)?\)")


def _schema_text(schema: dict[str, Any]) -> str:
    """A short, readable type for one JSON schema (``$ref`` -> the model's name with a link)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{_anchor(name)})"
    if "anyOf" in schema:
        return " or ".join(_schema_text(option) for option in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {_schema_text(schema.get('items', {}))}"
    if kind is None:
        return "any"
    if isinstance(kind, list):
        return " or ".join(f"`{k}`" for k in kind)
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    return f"`{kind}`"


def _anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def openapi_markdown(document: dict[str, Any]) -> str:
    """Render an OpenAPI 3.1 document as a Markdown page: one section per operation, then the schemas."""
    info = document.get("info", {})
    lines = [
        f"# {info.get('title', 'REST API')}",
        "",
        "Generated at build time from `agl_core.store.http.openapi.openapi_document()`; "
        "`agl store serve` serves the same document at `/v1/agl/openapi.json`.",
        "",
        info.get("description", ""),
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, methods in document.get("paths", {}).items():
        for method in sorted(methods, key=lambda m: _METHOD_ORDER.index(m) if m in _METHOD_ORDER else 99):
            operation = methods[method]
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append((method, path, operation))
    for tag, operations in by_tag.items():
        lines += [f"## {tag.capitalize()}", ""]
        for method, path, operation in operations:
            lines += [f"### `{method.upper()} {path}`", "", _cell(operation.get("summary", "")), ""]
            note = " No bearer token needed." if operation.get("security") == [] else ""
            lines += [f"Operation id: `{operation.get('operationId', '')}`.{note}", ""]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
                for parameter in parameters:
                    lines.append(
                        f"| `{parameter['name']}` | {parameter['in']} "
                        f"| {_schema_text(parameter.get('schema', {}))} "
                        f"| {'yes' if parameter.get('required') else 'no'} "
                        f"| {_cell(parameter.get('description', ''))} |"
                    )
                lines.append("")
            body = operation.get("requestBody")
            if body:
                for media, content in body.get("content", {}).items():
                    required = "required" if body.get("required") else "optional"
                    lines.append(
                        f"Request body ({media}, {required}): {_schema_text(content.get('schema', {}))}"
                    )
                lines.append("")
            lines += ["| status | answer |", "|---|---|"]
            for status, response in operation.get("responses", {}).items():
                schemas = [_schema_text(c.get("schema", {})) for c in response.get("content", {}).values()]
                answer = _cell(response.get("description", ""))
                if schemas:
                    answer += " — " + ", ".join(schemas)
                lines.append(f"| {status} | {answer} |")
            lines.append("")
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        lines += ["## Schemas", ""]
        for name, schema in schemas.items():
            lines += [f"### `{name}` {{ #{_anchor(name)} }}", ""]
            if schema.get("description"):
                lines += [_cell(schema["description"]), ""]
            properties = schema.get("properties", {})
            if properties:
                required = set(schema.get("required", []))
                lines += ["| field | type | required |", "|---|---|---|"]
                for field, field_schema in properties.items():
                    lines.append(
                        f"| `{field}` | {_schema_text(field_schema)} "
                        f"| {'yes' if field in required else 'no'} |"
                    )
                lines.append("")
            elif "enum" in schema or "type" in schema or "anyOf" in schema:
                lines += [f"Type: {_schema_text(schema)}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _command_markdown(command: click.Command, path: str, ctx: click.Context, lines: list[str]) -> None:
    lines += [f"## `{path}`", ""]
    if command.help:
        lines += [inspect.cleandoc(click.unstyle(command.help)), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"{path} {usage}".rstrip(), "```", ""]
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            if isinstance(param, click.Argument):
                rows.append((param.make_metavar(ctx), "argument"))
            continue
        rows.append((record[0], record[1] or "argument"))
    if rows:
        lines += ["| option | description |", "|---|---|"]
        lines += [f"| `{_cell(name)}` | {_cell(text)} |" for name, text in rows]
        lines.append("")
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            sub_ctx = click.Context(sub, info_name=name, parent=ctx)
            _command_markdown(sub, f"{path} {name}", sub_ctx, lines)


def cli_markdown(group: click.Group) -> str:
    """Render a click group and all its subcommands as a Markdown reference page."""
    lines = [
        "# CLI reference",
        "",
        "Generated at build time from the `agl` click commands (the built-in ones; a plugin's commands "
        "appear in `agl --help` once it is installed).",
        "",
    ]
    ctx = click.Context(group, info_name="agl")
    _command_markdown(group, "agl", ctx, lines)
    return "\n".join(lines).rstrip() + "\n"


def rewrite_repository_links(markdown: str) -> str:
    """Send links to a plugin README to its page (``../plugins/agl-x/README.md`` -> ``plugins/agl-x.md``)."""
    return _PLUGIN_README_LINK.sub(lambda m: f"](plugins/{m.group(1)}.md{m.group(2) or ''})", markdown)


def _slug(title: str) -> str:
    text = re.sub(r"[^\w\s-]", "", title.lower())
    return re.sub(r"[\s]+", "-", text.strip())


def markdown_section(markdown: str, anchor: str) -> str:
    """The body of the ``##`` section whose heading slugs to ``anchor`` (up to the next ``##`` heading).

    Raises:
        LookupError: no such section (the message lists the sections there are).
    """
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_fence = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            current = sections.setdefault(_slug(line[3:]), [])
            continue
        if not in_fence and line.startswith("# "):
            current = None
            continue
        if current is not None:
            current.append(line)
    if anchor not in sections:
        raise LookupError(f"no section #{anchor}; the sections are: {', '.join(sections) or 'none'}")
    return "\n".join(sections[anchor]).strip() + "\n"


def include_sections(markdown: str, docs_dir: Path) -> str:
    """Replace each ``<!-- include-section: page.md#anchor -->`` line with that section of the page."""

    def section(match: re.Match[str]) -> str:
        page = docs_dir / match.group(1)
        return markdown_section(page.read_text(encoding="utf-8"), match.group(2))

    return _INCLUDE_SECTION.sub(section, markdown)


def plugin_page(readme: Path) -> str:
    """A plugin's README as a site page, as it is (``--strict`` flags a link that does not resolve)."""
    return readme.read_text(encoding="utf-8")


CHANGELOG_MISSING = """# Changelog

The repository has no `CHANGELOG.md` yet. Once it has one, this page shows it
(the site includes it at build time).
"""


def changelog_page(root: Path = REPO_ROOT) -> str:
    """``CHANGELOG.md`` of the repository, or a page that says there is none yet."""
    path = root / "CHANGELOG.md"
    return path.read_text(encoding="utf-8") if path.is_file() else CHANGELOG_MISSING


def plugin_readmes(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Each plugin's README by distribution name (``agl-apo`` -> ``plugins/agl-apo/README.md``)."""
    return {p.parent.name: p for p in sorted(root.glob("plugins/agl-*/README.md"))}


def generated_pages(root: Path = REPO_ROOT) -> dict[str, str]:
    """Every generated page of the site: path under ``docs/`` -> Markdown."""
    from agl_core.cli import build_cli
    from agl_core.store.http.openapi import openapi_document

    pages = {
        "reference/rest-api.md": openapi_markdown(openapi_document()),
        "reference/cli.md": cli_markdown(build_cli()),
        "changelog.md": changelog_page(root),
    }
    for name, readme in plugin_readmes(root).items():
        pages[f"plugins/{name}.md"] = plugin_page(readme)
    return pages


_EXTERNAL_ASSET = re.compile(
    r"<(?:script[^>]*\ssrc|link[^>]*\shref|img[^>]*\ssrc)=[\"'](?:https?:)?//[^\"']+", re.IGNORECASE
)


def external_assets(site_dir: Path) -> list[str]:
    """Scripts, stylesheets, fonts and images the built site would fetch from the network (should be none)."""
    found = []
    for page in sorted(site_dir.rglob("*.html")):
        for match in _EXTERNAL_ASSET.finditer(page.read_text(encoding="utf-8")):
            found.append(f"{page.relative_to(site_dir).as_posix()}: {match.group(0)}")
    return found


def main(argv: list[str] | None = None) -> int:
    """``python tools/docs_site.py check-offline SITE_DIR``: exit 1 naming each external asset of the site."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "check-offline":
        print("usage: python tools/docs_site.py check-offline SITE_DIR", file=sys.stderr)
        return 2
    found = external_assets(Path(args[1]))
    for line in found:
        print(f"external asset (the site must work offline): {line}", file=sys.stderr)
    return 1 if found else 0


# --- MkDocs events ------------------------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site."""
    from mkdocs.structure.files import File

    for src_uri, content in generated_pages().items():
        files.append(File.generated(config, src_uri, content=content))
    return files


def on_page_markdown(markdown: str, *, config: Any, **kwargs: Any) -> str:
    """Include marked sections of other pages; links to a plugin's README go to that plugin's page."""
    return rewrite_repository_links(include_sections(markdown, Path(config["docs_dir"])))


if __name__ == "__main__":
    raise SystemExit(main())
