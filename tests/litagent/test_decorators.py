"""@rollout, @llm_rollout, @prompt_rollout: signature validation, injection by name and type, strip_proxy."""

from __future__ import annotations

import inspect
import logging
import pickle
from typing import Any

import pytest

from agl_core.litagent import (
    AgentSignatureError,
    FunctionalLitAgent,
    LitAgent,
    MissingResourceError,
    llm_rollout,
    prompt_rollout,
    rollout,
)
from agl_core.types import LLM, Attempt, AttemptedRollout, PromptTemplate, ProxyLLM, Rollout

PROXY = ProxyLLM(endpoint="http://proxy:9000/v1", model="policy")
PLAIN = LLM(endpoint="http://judge:8000/v1", model="judge")
PROMPT = PromptTemplate(template="Solve {task}", engine="f-string")


def attempted(rollout_id: str = "ro-1", attempt_id: str = "at-1") -> AttemptedRollout:
    attempt = Attempt(rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=1, start_time=0.0)
    return AttemptedRollout(rollout_id=rollout_id, input="t", start_time=0.0, attempt=attempt)


@rollout
def module_level_agent(task: str, llm: LLM) -> float:
    """A module-level agent, picklable by reference."""
    return float(len(task))


# -- validation -----------------------------------------------------------------------------------


def test_llm_rollout_requires_task_first() -> None:
    def agent(question: str, llm: LLM) -> float:
        return 0.0

    with pytest.raises(ValueError) as info:
        llm_rollout(agent)
    message = str(info.value)
    assert "first parameter must be named `task`, not `question`" in message
    assert "def my_agent(task, llm: agl.LLM) -> float" in message


def test_llm_rollout_requires_an_llm_parameter() -> None:
    def agent(task: str, rollout: Rollout) -> float:
        return 0.0

    with pytest.raises(AgentSignatureError, match="no parameter for the LLM"):
        llm_rollout(agent)


def test_llm_rollout_accepts_an_llm_by_type_under_any_name() -> None:
    @llm_rollout
    def agent(task: str, model: LLM) -> str:
        return model.model

    assert agent.rollout("t", {"m": PLAIN}, attempted()) == "judge"


def test_prompt_rollout_requires_a_prompt_template_parameter() -> None:
    def agent(task: str, llm: LLM) -> float:
        return 0.0

    with pytest.raises(ValueError) as info:
        prompt_rollout(agent)
    assert "no parameter for the prompt template" in str(info.value)
    assert "def my_agent(task, prompt_template: agl.PromptTemplate)" in str(info.value)


def test_rollout_rejects_parameters_it_cannot_fill() -> None:
    def agent(task: str, llm: LLM, temperature: float) -> float:
        return 0.0

    with pytest.raises(NotImplementedError) as info:
        rollout(agent)
    assert isinstance(info.value, ValueError)
    assert "does not know what to pass to `temperature`" in str(info.value)
    assert "agent(task: 'str', llm: 'LLM', temperature: 'float')" in str(info.value)


def test_rollout_rejects_a_function_without_parameters() -> None:
    def agent() -> float:
        return 0.0

    with pytest.raises(AgentSignatureError, match="first parameter must be the task"):
        rollout(agent)


def test_rollout_rejects_non_callables() -> None:
    with pytest.raises(AgentSignatureError, match="expects a function"):
        rollout(42)  # type: ignore[call-overload]


def test_parameters_with_defaults_and_varargs_are_left_alone() -> None:
    @rollout
    def agent(task: str, *args: Any, retries: int = 3, **kwargs: Any) -> tuple[Any, ...]:
        return task, args, retries, kwargs

    assert agent.rollout("t", {"llm": PLAIN}, attempted()) == ("t", (), 3, {})


# -- the wrapper ----------------------------------------------------------------------------------


def test_decorated_function_keeps_metadata_and_stays_callable() -> None:
    assert isinstance(module_level_agent, FunctionalLitAgent)
    assert isinstance(module_level_agent, LitAgent)
    assert module_level_agent.__name__ == "module_level_agent"
    assert module_level_agent.__doc__ == "A module-level agent, picklable by reference."
    assert list(inspect.signature(module_level_agent).parameters) == ["task", "llm"]
    assert module_level_agent("abcd", PLAIN) == 4.0


def test_module_level_agent_pickles_by_reference() -> None:
    assert pickle.loads(pickle.dumps(module_level_agent)) is module_level_agent


async def test_sync_and_async_agents_refuse_the_other_calling_convention() -> None:
    @rollout
    def sync_agent(task: str) -> float:
        return 1.0

    @rollout
    async def async_agent(task: str) -> float:
        return 2.0

    assert not sync_agent.is_async()
    assert async_agent.is_async()
    assert sync_agent.rollout("t", {}, attempted()) == 1.0
    assert await async_agent.rollout_async("t", {}, attempted()) == 2.0
    with pytest.raises(RuntimeError, match="rollout_async"):
        async_agent.rollout("t", {}, attempted())
    with pytest.raises(RuntimeError, match="sync function"):
        await sync_agent.rollout_async("t", {}, attempted())


# -- injection ------------------------------------------------------------------------------------


def test_injection_by_name() -> None:
    @rollout
    def agent(task: str, llm: Any, prompt_template: Any, rollout: Any, resources: Any) -> tuple[Any, ...]:
        return llm, prompt_template, rollout, resources

    resources = {"main": PLAIN, "prompt": PROMPT}
    current = attempted()
    llm, prompt, got_rollout, got_resources = agent("t", PLAIN, PROMPT, current, resources)
    assert (llm, prompt, got_rollout, got_resources) == (PLAIN, PROMPT, current, resources)
    llm, prompt, got_rollout, got_resources = agent.rollout("t", resources, current)  # type: ignore[misc]
    assert llm is PLAIN
    assert prompt is PROMPT
    assert got_rollout is current
    assert got_resources is resources


async def test_injection_by_type_annotation_async() -> None:
    @rollout
    async def agent(
        task: str, model: LLM, template: PromptTemplate, run: AttemptedRollout
    ) -> tuple[Any, ...]:
        return model, template, run

    current = attempted()
    model, template, run = await agent.rollout_async("t", {"p": PROMPT, "m": PLAIN}, current)  # type: ignore[misc]
    assert (model, template, run) == (PLAIN, PROMPT, current)


def test_several_llms_pick_the_one_named_like_the_parameter() -> None:
    @rollout
    def agent(task: str, judge: LLM, policy: LLM) -> tuple[str, str]:
        return judge.model, policy.model

    policy = LLM(endpoint="http://policy/v1", model="policy")
    assert agent.rollout("t", {"policy": policy, "judge": PLAIN}, attempted()) == ("judge", "policy")


def test_several_llms_without_a_name_match_use_the_first_and_warn(caplog: pytest.LogCaptureFixture) -> None:
    @llm_rollout
    def agent(task: str, llm: LLM) -> str:
        return llm.model

    second = LLM(endpoint="http://b/v1", model="second")
    with caplog.at_level(logging.WARNING):
        assert agent.rollout("t", {"a": PLAIN, "b": second}, attempted()) == "judge"
    assert "several LLM resources (a, b)" in caplog.text


def test_missing_resource_names_the_parameter_and_the_fix() -> None:
    @llm_rollout
    def agent(task: str, llm: LLM) -> float:
        return 0.0

    with pytest.raises(MissingResourceError) as info:
        agent.rollout("t", {"prompt": PROMPT}, attempted())
    message = str(info.value)
    assert message.startswith("No LLM resource found for parameter `llm`")
    assert "'prompt' (PromptTemplate)" in message
    assert "store.add_resources" in message


def test_missing_optional_resource_keeps_the_default() -> None:
    @rollout
    def agent(task: str, prompt_template: PromptTemplate | None = None) -> Any:
        return prompt_template

    assert agent.rollout("t", {}, attempted()) is None
    assert agent.rollout("t", {"p": PROMPT}, attempted()) is PROMPT


# -- strip_proxy ----------------------------------------------------------------------------------


def test_proxy_llm_is_routed_to_the_attempt_and_stripped_by_default() -> None:
    @llm_rollout
    def agent(task: str, llm: LLM) -> LLM:
        return llm

    llm = agent.rollout("t", {"llm": PROXY}, attempted("ro-7", "at-3"))
    assert type(llm) is LLM
    assert llm.endpoint == "http://proxy:9000/rollout/ro-7/attempt/at-3/v1"
    assert llm.model == "policy"


def test_strip_proxy_false_keeps_the_proxy() -> None:
    @llm_rollout(strip_proxy=False)
    def agent(task: str, llm: LLM) -> LLM:
        return llm

    assert agent.rollout("t", {"llm": PROXY}, attempted()) is PROXY


def test_proxy_llm_annotation_receives_the_proxy_unchanged() -> None:
    @rollout
    def agent(task: str, proxy: ProxyLLM) -> ProxyLLM:
        return proxy

    assert agent.rollout("t", {"plain": PLAIN, "proxy": PROXY}, attempted()) is PROXY


def test_stripping_needs_an_attempted_rollout() -> None:
    @llm_rollout
    def agent(task: str, llm: LLM) -> LLM:
        return llm

    plain_rollout = Rollout(rollout_id="ro-1", input="t", start_time=0.0)
    with pytest.raises(ValueError, match="Rollout is not an AttemptedRollout"):
        agent.rollout("t", {"llm": PROXY}, plain_rollout)


def test_unresolvable_string_annotations_are_read_by_name() -> None:
    @rollout
    def agent(task: UndefinedTaskType, model: agl.LLM | None) -> Any:  # type: ignore[name-defined]  # noqa: F821
        return model

    assert agent.rollout("t", {"m": PLAIN}, attempted()) is PLAIN
