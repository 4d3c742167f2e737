"""How a function agent's parameters are filled: analysis at decoration time, resolution per rollout.

A function agent takes the task as its first parameter, named ``task``. Every other parameter is filled
by the runner, chosen by its type annotation when that names a known type, else by its name:

==========================================  ================================================
parameter                                   receives
==========================================  ================================================
annotated ``LLM`` or named ``llm``          an ``LLM`` resource (a ``ProxyLLM`` is routed to
                                            the attempt and given as a plain ``LLM`` when
                                            ``strip_proxy``)
annotated ``ProxyLLM``                      a ``ProxyLLM`` resource, unchanged
annotated ``PromptTemplate`` or named       a ``PromptTemplate`` resource
``prompt_template``
annotated ``Rollout`` or named ``rollout``  the rollout (an ``AttemptedRollout`` in runners)
named ``resources``                         every resource, by name
==========================================  ================================================

When several resources fit a parameter, the one stored under the parameter's own name wins, else the
first one. A parameter with a default value may be left unfilled; any other parameter is an error.
"""

from __future__ import annotations

import inspect
import logging
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agl_core.litagent.errors import AgentSignatureError, MissingResourceError
from agl_core.types import LLM, AttemptedRollout, PromptTemplate, ProxyLLM, Resource, Rollout

__all__ = [
    "AgentSignature",
    "InjectedParameter",
    "ParameterKind",
    "analyze_signature",
    "build_kwargs",
    "signature_error",
]

logger = logging.getLogger(__name__)

ParameterKind = Literal["llm", "proxy_llm", "prompt_template", "rollout", "resources"]
"""What the runner passes to an injected parameter."""

_KIND_BY_NAME: dict[str, ParameterKind] = {
    "llm": "llm",
    "prompt_template": "prompt_template",
    "rollout": "rollout",
    "resources": "resources",
}
_KIND_BY_TYPE_NAME: dict[str, ParameterKind] = {
    "LLM": "llm",
    "ProxyLLM": "proxy_llm",
    "PromptTemplate": "prompt_template",
    "Rollout": "rollout",
    "AttemptedRollout": "rollout",
}
_RESOURCE_CLASS: dict[str, type[Resource]] = {
    "llm": LLM,
    "proxy_llm": ProxyLLM,
    "prompt_template": PromptTemplate,
}
_RESOURCE_LABEL: dict[str, str] = {
    "llm": "LLM",
    "proxy_llm": "ProxyLLM",
    "prompt_template": "PromptTemplate",
}

_INJECTABLE_HELP = (
    "Parameters after the task are filled by type or name: annotated LLM or named `llm` (the LLM), "
    "annotated ProxyLLM (the proxy, unchanged), annotated PromptTemplate or named `prompt_template`, "
    "annotated Rollout or named `rollout` (the rollout), named `resources` (all resources by name). Any "
    "other parameter needs a default value."
)


@dataclass(frozen=True)
class InjectedParameter:
    """One parameter the runner fills, with what it receives."""

    name: str
    kind: ParameterKind
    has_default: bool


@dataclass(frozen=True)
class AgentSignature:
    """The analysed signature of a function agent."""

    task_parameter: str
    injected: tuple[InjectedParameter, ...]

    def kinds(self) -> set[ParameterKind]:
        """The kinds of every injected parameter."""
        return {p.kind for p in self.injected}


def _describe(func: Callable[..., Any]) -> str:
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    try:
        return f"{name}{inspect.signature(func)}"
    except (TypeError, ValueError):
        return str(name)


def signature_error(
    func: Callable[..., Any], decorator: str, problem: str, example: str
) -> AgentSignatureError:
    """An :class:`AgentSignatureError` that names the function, the problem and an example signature."""
    return AgentSignatureError(
        f"@{decorator} cannot use {_describe(func)}: {problem}. Expected a function like:\n\n"
        f"    @{decorator}\n    {example}\n\n{_INJECTABLE_HELP}"
    )


def _kind_of_string(annotation: str) -> ParameterKind | None:
    """Best-effort kind of an annotation that could not be evaluated (``"agl.LLM | None"``)."""
    text = annotation.strip().strip("'\"")
    for wrapper in ("Optional[", "typing.Optional[", "Annotated["):
        if text.startswith(wrapper) and text.endswith("]"):
            text = text[len(wrapper) : -1].split(",")[0]
    kinds = {
        kind
        for part in text.split("|")
        if (name := part.strip().rsplit(".", 1)[-1]) != "None" and (kind := _KIND_BY_TYPE_NAME.get(name))
    }
    return kinds.pop() if len(kinds) == 1 else None


def _kind_of_annotation(annotation: Any) -> ParameterKind | None:
    """The kind an annotation asks for (``LLM``, ``Optional[PromptTemplate]``, ...), or None."""
    if annotation is inspect.Parameter.empty or annotation is None:
        return None
    if isinstance(annotation, str):
        return _kind_of_string(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind_of_annotation(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        kinds = {
            kind
            for arg in typing.get_args(annotation)
            if arg is not type(None) and (kind := _kind_of_annotation(arg)) is not None
        }
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(annotation, type):
        if issubclass(annotation, ProxyLLM):
            return "proxy_llm"
        if issubclass(annotation, LLM):
            return "llm"
        if issubclass(annotation, PromptTemplate):
            return "prompt_template"
        if issubclass(annotation, Rollout):
            return "rollout"
    return None


def _type_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """Evaluated annotations when possible (string annotations included); {} when they cannot be."""
    target = inspect.unwrap(func)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:  # an unresolvable forward reference: fall back to the raw annotations
        return {}


def analyze_signature(func: Callable[..., Any], *, decorator: str, example: str) -> AgentSignature:
    """Check that ``func`` can run as an agent and record which parameters to fill.

    Raises:
        AgentSignatureError: no ``task`` first parameter, or a parameter that can be neither injected nor
            left to its default. The message shows ``example``.
    """
    if not callable(func):
        raise AgentSignatureError(f"@{decorator} expects a function, got {type(func).__name__} {func!r}.")
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError) as exc:
        raise AgentSignatureError(f"@{decorator} cannot read the signature of {func!r}: {exc}") from exc
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise signature_error(func, decorator, "its first parameter must be the task", example)
    if params[0].name != "task":
        raise signature_error(
            func, decorator, f"its first parameter must be named `task`, not `{params[0].name}`", example
        )
    hints = _type_hints(func)
    injected: list[InjectedParameter] = []
    unfillable: list[str] = []
    for param in params[1:]:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        has_default = param.default is not inspect.Parameter.empty
        kind = _kind_of_annotation(hints.get(param.name, param.annotation)) or _KIND_BY_NAME.get(param.name)
        if kind is None or param.kind is inspect.Parameter.POSITIONAL_ONLY:
            if not has_default:
                unfillable.append(param.name)
            continue
        injected.append(InjectedParameter(param.name, kind, has_default))
    if unfillable:
        names = ", ".join(f"`{n}`" for n in unfillable)
        raise signature_error(func, decorator, f"agl does not know what to pass to {names}", example)
    return AgentSignature(task_parameter=params[0].name, injected=tuple(injected))


def _pick_resource(
    resources: Mapping[str, Any], param: InjectedParameter, agent_name: str, warned: set[str]
) -> Resource | None:
    """The resource for ``param``: the one stored under its name if it fits, else the first that fits."""
    cls = _RESOURCE_CLASS[param.kind]
    own = resources.get(param.name)
    if isinstance(own, cls):
        return own
    matches = [r for r in resources.values() if isinstance(r, cls)]
    if len(matches) > 1 and param.name not in warned:
        warned.add(param.name)
        names = [n for n, r in resources.items() if isinstance(r, cls)]
        logger.warning(
            "Agent %s: several %s resources (%s) fit parameter `%s`; using the first, %r. Name the parameter "
            "after the resource you want to pick another one.",
            agent_name,
            _RESOURCE_LABEL[param.kind],
            ", ".join(names),
            param.name,
            names[0],
        )
    return matches[0] if matches else None


def _route_proxy(llm: ProxyLLM, rollout: Rollout, agent_name: str) -> LLM:
    if not isinstance(rollout, AttemptedRollout):
        raise ValueError(
            f"Rollout is not an AttemptedRollout. Agent {agent_name} received a ProxyLLM, which must be "
            f"routed to the rollout's attempt, but rollout {getattr(rollout, 'rollout_id', '?')!r} carries "
            "no attempt. Run the agent through a runner (which passes an AttemptedRollout), or decorate it "
            "with strip_proxy=False to receive the ProxyLLM."
        )
    return llm.with_attempted_rollout(rollout)


def build_kwargs(
    signature: AgentSignature,
    resources: Mapping[str, Any],
    rollout: Rollout,
    *,
    strip_proxy: bool,
    agent_name: str,
    warned: set[str],
) -> dict[str, Any]:
    """Keyword arguments for one call of a function agent.

    Raises:
        MissingResourceError: a parameter without default asks for a resource type the rollout lacks.
        ValueError: a ``ProxyLLM`` must be stripped but ``rollout`` is not an ``AttemptedRollout``.
    """
    kwargs: dict[str, Any] = {}
    for param in signature.injected:
        if param.kind == "rollout":
            kwargs[param.name] = rollout
            continue
        if param.kind == "resources":
            kwargs[param.name] = resources
            continue
        resource = _pick_resource(resources, param, agent_name, warned)
        if resource is None:
            if param.has_default:
                continue
            label = _RESOURCE_LABEL[param.kind]
            available = ", ".join(f"{n!r} ({type(r).__name__})" for n, r in resources.items()) or "none"
            raise MissingResourceError(
                f"No {label} resource found for parameter `{param.name}` of agent {agent_name}. Resources of "
                f"rollout {getattr(rollout, 'rollout_id', '?')!r}: {available}. Publish one, e.g. "
                f"store.add_resources({{'{param.name}': {label}(...)}}) or Trainer(initial_resources=...)."
            )
        if param.kind == "llm" and strip_proxy and isinstance(resource, ProxyLLM):
            resource = _route_proxy(resource, rollout, agent_name)
        kwargs[param.name] = resource
    return kwargs
