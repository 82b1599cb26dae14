"""LangGraph graphs for ``benchmarks.bench_langgraph_runner``: the same builder
runs on LangGraph's own runtime and through ``hayata_py.langgraph.compile``."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def _step(name: str) -> Any:
    def node(state: Steps) -> dict[str, Any]:
        return {"steps": [name]}
    return node


seq3 = StateGraph(Steps)
for _n in ("a", "b", "c"):
    seq3.add_node(_n, _step(_n))
seq3.add_edge(START, "a")
seq3.add_edge("a", "b")
seq3.add_edge("b", "c")
seq3.add_edge("c", END)

fanout8 = StateGraph(Steps)
fanout8.add_node("join", _step("join"))
_branches = [f"b{i}" for i in range(8)]
for _n in _branches:
    fanout8.add_node(_n, _step(_n))
    fanout8.add_edge(START, _n)
fanout8.add_edge(_branches, "join")
fanout8.add_edge("join", END)


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def model(state: Chat) -> dict[str, Any]:
    """A fake chat model: two tool calls, then an answer."""
    calls = sum(isinstance(m, ToolMessage) for m in state["messages"])
    if calls < 2:
        return {"messages": [AIMessage(content="", tool_calls=[
            {"name": "lookup", "args": {"n": calls}, "id": f"call-{calls}",
             "type": "tool_call"}])]}
    return {"messages": [AIMessage(content="done")]}


def tools(state: Chat) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    return {"messages": [ToolMessage(content=f"result {call['args']['n']}",
                                     tool_call_id=call["id"])]}


def route(state: Chat) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def _react(model: Any, tools: Any) -> StateGraph[Any]:
    """A ReAct loop: ``model`` until it calls no tool, ``tools`` after each call."""
    graph = StateGraph(Chat)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph


react = _react(model, tools)


LONG_CALLS = 20
"""The long ReAct loop's tool calls."""


def long_model(state: Chat) -> dict[str, Any]:
    """A fake chat model with 1 KB answers: 20 tool calls, then an answer."""
    calls = sum(isinstance(m, ToolMessage) for m in state["messages"])
    if calls < LONG_CALLS:
        return {"messages": [AIMessage(content="x" * 1000, tool_calls=[
            {"name": "lookup", "args": {"n": calls}, "id": f"call-{calls}",
             "type": "tool_call"}])]}
    return {"messages": [AIMessage(content="done")]}


def long_tools(state: Chat) -> dict[str, Any]:
    """A tool with 1 KB results."""
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    return {"messages": [ToolMessage(content="y" * 1000, tool_call_id=call["id"])]}


react_long = _react(long_model, long_tools)


async def slow_model(state: Steps) -> dict[str, Any]:
    """An LLM call's wait: 200 ms, then a word."""
    await asyncio.sleep(0.2)
    return {"steps": ["llm"]}


llm = StateGraph(Steps)
llm.add_node("llm", slow_model)
llm.add_edge(START, "llm")
llm.add_edge("llm", END)
