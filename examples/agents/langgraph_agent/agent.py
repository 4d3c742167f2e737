"""A LangGraph ReAct graph: a model node (``ChatOpenAI`` with tools bound) and a ``ToolNode``, looping.

No agl import: the agl entry (``rollout.py``) passes the endpoint and model it was given.
"""

from __future__ import annotations

import math_tasks
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return math_tasks.multiply(a, b)


def build_graph(*, model: str, base_url: str, api_key: str) -> CompiledStateGraph:
    """The compiled graph: ``model`` -> (tool calls? ``tools`` -> ``model``) -> end."""
    llm = ChatOpenAI(model=model, base_url=base_url, api_key=api_key, max_retries=1).bind_tools([multiply])

    def call_model(state: MessagesState) -> dict[str, list]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([multiply]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Run the graph on ``question`` and return the last message's text."""
    graph = build_graph(model=model, base_url=base_url, api_key=api_key)
    state = graph.invoke(
        {
            "messages": [
                SystemMessage("Use the multiply tool, then state the result."),
                HumanMessage(question),
            ]
        },
        {"recursion_limit": 8},
    )
    return str(state["messages"][-1].content)
