"""``lightning_cli``: a command line built from classes' ``__init__`` signatures (Agent Lightning 0.3's
``agentlightning.config``, same flags and conversions), served as ``agl_core.config.lightning_cli``.

Each parameter ``p`` of class ``C`` becomes ``--c.p`` (lower-case class name, dashes for underscores).
``Optional[str|int|float]`` accept ``none``/``null``/``~``/``nil`` as None; ``bool`` accepts
yes/true/t/y/1 and no/false/f/n/0; ``list[T]`` takes several values; other types are passed as strings.
A parameter without a default that is not Optional is required.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["lightning_cli"]

logger = logging.getLogger(__name__)

_NULLS = {"none", "null", "~", "nil"}
_TRUE = {"yes", "true", "t", "y", "1"}
_FALSE = {"no", "false", "f", "n", "0"}

_C1 = TypeVar("_C1")
_C2 = TypeVar("_C2")
_C3 = TypeVar("_C3")
_C4 = TypeVar("_C4")


def _nullable(convert: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    def parse(value: str) -> Any:
        if value.lower() in _NULLS:
            return None
        try:
            return convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"Invalid {what} value: '{value}'") from None

    parse.__name__ = f"nullable_{what}"
    return parse


def _parse_bool(value: str) -> bool:
    if isinstance(value, bool):
        return value
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(
        f"Boolean value expected (e.g., 'true', 'false', 'yes', 'no'), got '{value}'"
    )


def _unwrap(annotation: Any) -> tuple[Any, bool, bool]:
    """``(core type, is Optional, is list)`` of a parameter annotation."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        annotation = args[0] if len(args) == 1 else annotation
        origin = typing.get_origin(annotation)
    if origin in (list, typing.List):  # noqa: UP006 - typing.List is what older annotations give
        item_args = typing.get_args(annotation)
        return (item_args[0] if item_args else str), optional, True
    return annotation, optional, False


def _converter(core: Any, optional: bool) -> Callable[[str], Any]:
    if core is bool:
        return _parse_bool
    if optional and core in (str, int, float):
        return _nullable(core, core.__name__)
    if core in (int, float, str):
        return core  # type: ignore[no-any-return]
    return str


def _add_class_arguments(parser: argparse.ArgumentParser, cls: type[Any]) -> dict[str, str]:
    """Add ``cls``'s flags; returns parameter name -> argparse dest."""
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception as exc:
        logger.warning(
            "Could not resolve the type hints of %s.__init__ (%s); values are parsed as strings.", cls, exc
        )
        hints = {}
    dests: dict[str, str] = {}
    prefix = cls.__name__.lower()
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        core, optional, is_list = _unwrap(hints.get(name, param.annotation))
        kwargs: dict[str, Any] = {"type": _converter(core, optional)}
        if is_list:
            kwargs["nargs"] = "*"
        has_default = param.default is not inspect.Parameter.empty
        if has_default:
            kwargs["default"] = param.default
        elif optional:
            kwargs["default"] = None
        else:
            kwargs["required"] = True
        type_name = getattr(core, "__name__", str(core))
        kwargs["help"] = f"{cls.__name__}.{name} ({'list of ' if is_list else ''}{type_name}"
        kwargs["help"] += ", optional)" if optional else ")"
        dest = f"{prefix}_{name}"
        parser.add_argument(f"--{prefix}.{name.replace('_', '-')}", dest=dest, **kwargs)
        dests[name] = dest
    return dests


@overload
def lightning_cli(cls1: type[_C1], /) -> _C1: ...
@overload
def lightning_cli(cls1: type[_C1], cls2: type[_C2], /) -> tuple[_C1, _C2]: ...
@overload
def lightning_cli(cls1: type[_C1], cls2: type[_C2], cls3: type[_C3], /) -> tuple[_C1, _C2, _C3]: ...
@overload
def lightning_cli(
    cls1: type[_C1], cls2: type[_C2], cls3: type[_C3], cls4: type[_C4], /
) -> tuple[_C1, _C2, _C3, _C4]: ...
@overload
def lightning_cli(*classes: type[Any]) -> Any: ...
def lightning_cli(*classes: type[Any]) -> Any:
    """Parse ``sys.argv`` into constructor arguments for ``classes`` and build one instance of each.

    Returns:
        The instance for one class, a tuple in argument order for several, ``()`` for none.
    """
    if not classes:
        return ()
    parser = argparse.ArgumentParser(
        description="CLI configurator for application components.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    dest_maps = [_add_class_arguments(parser, cls) for cls in classes]
    parsed = parser.parse_args()
    instances = []
    for cls, dests in zip(classes, dest_maps, strict=True):
        kwargs = {name: getattr(parsed, dest) for name, dest in dests.items()}
        try:
            instances.append(cls(**kwargs))
        except Exception:
            logger.error("Could not build %s from the command line arguments %s.", cls.__name__, kwargs)
            raise
    return instances[0] if len(instances) == 1 else tuple(instances)
