"""Turn a plain function into an agent: `FunctionalLitAgent` and the `rollout` decorators."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from agl_core.litagent.injection import AgentSignature, analyze_signature, build_kwargs, signature_error
from agl_core.litagent.litagent import LitAgent

if TYPE_CHECKING:
    from agl_core.types import NamedResources, Rollout, RolloutRawResult

__all__ = ["FunctionalLitAgent", "llm_rollout", "prompt_rollout", "rollout"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_GENERIC_EXAMPLE = "def my_agent(task, llm: agl.LLM, rollout: agl.Rollout) -> float: ..."
_LLM_EXAMPLE = "def my_agent(task, llm: agl.LLM) -> float: ..."
_PROMPT_EXAMPLE = "def my_agent(task, prompt_template: agl.PromptTemplate) -> float: ..."


def _is_coroutine_callable(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


class FunctionalLitAgent(LitAgent[T]):
    """An agent made from a sync or async function; calling the instance calls the function.

    The function takes the task first (named ``task``); its other parameters are filled per rollout as
    described in :mod:`agl_core.litagent.injection` (``llm``, ``prompt_template``, ``rollout``,
    ``resources``, or any parameter annotated ``LLM``/``ProxyLLM``/``PromptTemplate``/``Rollout``). The
    function's name, docstring and signature are kept.

    Args:
        rollout_func: The agent function.
        strip_proxy: Give a ``ProxyLLM`` to ``LLM`` parameters as a plain ``LLM`` routed to the current
            attempt (the default), instead of the proxy itself.

    Raises:
        AgentSignatureError: the function's signature cannot be filled (the message shows an example).
    """

    __name__: str
    __qualname__: str
    __wrapped__: Callable[..., Any]

    def __init__(self, rollout_func: Callable[..., Any], *, strip_proxy: bool = True) -> None:
        super().__init__()
        self._signature: AgentSignature = analyze_signature(
            rollout_func, decorator="rollout", example=_GENERIC_EXAMPLE
        )
        self._rollout_func = rollout_func
        self._strip_proxy = strip_proxy
        self._is_async_func = _is_coroutine_callable(rollout_func)
        self._warned: set[str] = set()
        functools.update_wrapper(self, rollout_func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the original function unchanged."""
        return self._rollout_func(*args, **kwargs)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickle a module-level decorated function by reference (its name now points at this agent)."""
        module = sys.modules.get(getattr(self, "__module__", ""), None)
        target: Any = module
        for part in str(getattr(self, "__qualname__", "")).split("."):
            target = getattr(target, part, None)
        if target is self:
            return self.__qualname__
        return super().__reduce_ex__(protocol)

    @property
    def _name(self) -> str:
        return str(getattr(self, "__qualname__", type(self).__name__))

    @property
    def strip_proxy(self) -> bool:
        """Whether ``ProxyLLM`` resources are given to ``LLM`` parameters as routed plain ``LLM``s."""
        return self._strip_proxy

    def is_async(self) -> bool:
        """True when the wrapped function is a coroutine function."""
        return self._is_async_func

    def _kwargs(self, resources: NamedResources, rollout: Rollout) -> dict[str, Any]:
        return build_kwargs(
            self._signature,
            resources,
            rollout,
            strip_proxy=self._strip_proxy,
            agent_name=self._name,
            warned=self._warned,
        )

    def rollout(self, task: T, resources: NamedResources, rollout: Rollout) -> RolloutRawResult:
        """Run the sync function on one task with its parameters filled.

        Raises:
            RuntimeError: the function is async (use :meth:`rollout_async`).
        """
        if self._is_async_func:
            raise RuntimeError(
                f"Agent {self._name} is an async function; call `await agent.rollout_async(...)`."
            )
        result: RolloutRawResult = self._rollout_func(task, **self._kwargs(resources, rollout))
        return result

    async def rollout_async(self, task: T, resources: NamedResources, rollout: Rollout) -> RolloutRawResult:
        """Await the async function on one task with its parameters filled.

        Raises:
            RuntimeError: the function is sync (use :meth:`rollout`).
        """
        if not self._is_async_func:
            raise RuntimeError(f"Agent {self._name} is a sync function; call `agent.rollout(...)` instead.")
        result: RolloutRawResult = await self._rollout_func(task, **self._kwargs(resources, rollout))
        return result


def _require_kind(func: Callable[..., Any], decorator: str, kinds: set[str], what: str, example: str) -> None:
    signature = analyze_signature(func, decorator=decorator, example=example)
    if not signature.kinds() & kinds:
        raise signature_error(func, decorator, f"it has no parameter for the {what}", example)


@overload
def llm_rollout(func: Callable[..., Any], *, strip_proxy: bool = True) -> FunctionalLitAgent[Any]: ...


@overload
def llm_rollout(
    func: None = None, *, strip_proxy: bool = True
) -> Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]: ...


def llm_rollout(
    func: Callable[..., Any] | None = None, *, strip_proxy: bool = True
) -> FunctionalLitAgent[Any] | Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]:
    """Make an agent from a function that takes the task and an LLM: ``def agent(task, llm: LLM)``.

    Usable bare (``@llm_rollout``) or with options (``@llm_rollout(strip_proxy=False)``).

    Raises:
        AgentSignatureError: the first parameter is not ``task``, no parameter takes the LLM, or another
            parameter cannot be filled.
    """

    def decorate(f: Callable[..., Any]) -> FunctionalLitAgent[Any]:
        _require_kind(f, "llm_rollout", {"llm", "proxy_llm"}, "LLM (`llm` or annotated LLM)", _LLM_EXAMPLE)
        return FunctionalLitAgent(f, strip_proxy=strip_proxy)

    return decorate if func is None else decorate(func)


@overload
def prompt_rollout(func: Callable[..., Any]) -> FunctionalLitAgent[Any]: ...


@overload
def prompt_rollout(func: None = None) -> Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]: ...


def prompt_rollout(
    func: Callable[..., Any] | None = None,
) -> FunctionalLitAgent[Any] | Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]:
    """Make an agent from a function that takes the task and a prompt template.

    ``def agent(task, prompt_template: PromptTemplate)``; usable as ``@prompt_rollout`` or
    ``@prompt_rollout()``.

    Raises:
        AgentSignatureError: the first parameter is not ``task``, no parameter takes the prompt template,
            or another parameter cannot be filled.
    """

    def decorate(f: Callable[..., Any]) -> FunctionalLitAgent[Any]:
        _require_kind(
            f,
            "prompt_rollout",
            {"prompt_template"},
            "prompt template (`prompt_template` or annotated PromptTemplate)",
            _PROMPT_EXAMPLE,
        )
        return FunctionalLitAgent(f)

    return decorate if func is None else decorate(func)


@overload
def rollout(func: Callable[..., Any], *, strip_proxy: bool = True) -> FunctionalLitAgent[Any]: ...


@overload
def rollout(
    func: None = None, *, strip_proxy: bool = True
) -> Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]: ...


def rollout(
    func: Callable[..., Any] | None = None, *, strip_proxy: bool = True
) -> FunctionalLitAgent[Any] | Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]:
    """Make an agent from any function whose first parameter is ``task`` and whose others can be filled.

    Covers the ``@llm_rollout`` and ``@prompt_rollout`` patterns and more: ``def agent(task, llm, rollout)``,
    ``def agent(task, resources)``, ``def agent(task, judge: LLM, policy: LLM)`` (each filled by its own
    resource name). Usable bare or as ``@rollout(strip_proxy=False)``.

    Raises:
        AgentSignatureError: the signature does not match (a ``ValueError`` and a ``NotImplementedError``);
            the message shows the expected form.
    """

    def decorate(f: Callable[..., Any]) -> FunctionalLitAgent[Any]:
        analyze_signature(f, decorator="rollout", example=_GENERIC_EXAMPLE)
        return FunctionalLitAgent(f, strip_proxy=strip_proxy)

    return decorate if func is None else decorate(func)
