"""What a program sees of its rollout: dotted paths into the task input and resources, and argv templates.

The *context* of an attempt is a dict with ``input`` (the task input), ``resources`` (each resource by
name, as its JSON dump), ``rollout_id``, ``attempt_id`` and ``mode``. A dotted path such as
``input.repo.url`` or ``resources.prompt.template`` reads one value of it (list items by index:
``input.files.0``). A template is a string in which ``{path}`` is replaced by that value when the
path starts with one of those names (other braces stay as they are; ``{{`` and ``}}`` are literal
braces); a value that is not a string is written as JSON. ``{path|json}`` writes the value as JSON even
when it is a string (a quoted, escaped string: fit for a JSON or TOML string in a config argument), and
``{path|shell}`` writes it quoted for a POSIX shell (for a ``sh -c`` command line).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ProgramValueError", "as_text", "lookup", "render"]

_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_PATH = re.compile(r"[A-Za-z_][\w-]*(\.[\w-]+)*")
_FILTERS = {
    "json": lambda value: json.dumps(value, ensure_ascii=False, default=str),
    "shell": lambda value: shlex.quote(as_text(value)),
}


class ProgramValueError(ValueError):
    """A dotted path or template does not fit the rollout (a missing key, a malformed template)."""


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` in ``context``.

    Raises:
        ProgramValueError: a part of the path is missing, naming the part and the keys that exist.
    """
    if not _PATH.fullmatch(path):
        raise ProgramValueError(
            f"{path!r} is not a dotted path; write names joined by dots, e.g. 'input.question'."
        )
    value: Any = context
    walked: list[str] = []
    for part in path.split("."):
        if isinstance(value, Mapping):
            if part not in value:
                where = ".".join(walked) or "the context"
                keys = ", ".join(sorted(map(str, value))[:20]) or "none"
                raise ProgramValueError(f"{path!r}: {where} has no key {part!r} (its keys: {keys}).")
            value = value[part]
        elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and part.isdigit():
            index = int(part)
            if index >= len(value):
                raise ProgramValueError(f"{path!r}: {'.'.join(walked)} has only {len(value)} items.")
            value = value[index]
        else:
            raise ProgramValueError(
                f"{path!r}: {'.'.join(walked)} is a {type(value).__name__}, which has no part {part!r}."
            )
        walked.append(part)
    return value


def as_text(value: Any) -> str:
    """A string as is; anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def render(template: str, context: Mapping[str, Any]) -> str:
    """``template`` with each ``{path}`` whose first name is a key of ``context`` replaced by its value.

    Other braces are left as they are (a program's inline code keeps its dicts); ``{{`` and ``}}`` give a
    literal ``{path}`` where one is needed.

    Raises:
        ProgramValueError: a path starts with a context key but does not exist.
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        field = match.group(1)
        if field is None:
            return token
        path, _, name = field.partition("|")
        if not _PATH.fullmatch(path) or path.split(".", 1)[0] not in context:
            return token
        value = lookup(context, path)
        if not name:
            return as_text(value)
        if name not in _FILTERS:
            raise ProgramValueError(f"{token!r}: unknown filter {name!r}; use |json or |shell.")
        return str(_FILTERS[name](value))

    return _FIELD.sub(replace, template)
