"""Dotted paths and templates: what a program's argv, stdin and environment are built from."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from agl_core.program.values import ProgramValueError, lookup, render

CONTEXT = {
    "input": {"question": 'say "hi"; rm -rf /', "files": ["a.py", "b.py"], "n": 3, "ok": True},
    "resources": {"prompt": {"template": "Be brief."}},
    "rollout_id": "ro-1",
}


def test_paths_read_keys_and_list_items() -> None:
    assert lookup(CONTEXT, "input.files.1") == "b.py"
    assert lookup(CONTEXT, "resources.prompt.template") == "Be brief."


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("input.missing", "input has no key 'missing' (its keys: files, n, ok, question)"),
        ("input.files.5", "has only 2 items"),
        ("input.n.x", "is a int, which has no part 'x'"),
        ("input..x", "not a dotted path"),
    ],
)
def test_a_bad_path_says_what_is_there(path: str, message: str) -> None:
    with pytest.raises(ProgramValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        lookup(CONTEXT, path)


def test_templates_replace_known_paths_and_leave_other_braces() -> None:
    assert render("{input.n} files: {input.files}", CONTEXT) == '3 files: ["a.py","b.py"]'
    assert render("{'a': 1} {x} {{input.n}} {rollout_id}", CONTEXT) == "{'a': 1} {x} {input.n} ro-1"
    assert render("{input.ok}", CONTEXT) == "true"


def test_json_and_shell_filters_quote_text_from_the_task() -> None:
    assert render("instructions={resources.prompt.template|json}", CONTEXT) == 'instructions="Be brief."'
    assert render("{input.question|json}", CONTEXT) == '"say \\"hi\\"; rm -rf /"'
    command = render("printf %s {input.question|shell}", CONTEXT)
    assert shlex.split(command)[-1] == CONTEXT["input"]["question"]  # type: ignore[index]
    assert (
        subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout == 'say "hi"; rm -rf /'
    )
    with pytest.raises(ProgramValueError, match="unknown filter 'yaml'"):
        render("{input.n|yaml}", CONTEXT)
