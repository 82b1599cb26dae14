"""A tool-calling LangGraph chat graph run on hayata_py, offline, with an approval interrupt().

The graph is plain LangGraph: a chat model node (a fake model here, so it runs
offline; any LangChain chat model works), an approval node that asks a person
with ``interrupt()`` before the tool runs, a ``ToolNode`` and
``tools_condition``. The one hayata line is ``hylg.compile(builder, system)``.

    python examples/langgraph_chat.py
"""

from __future__ import annotations

import tempfile
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

import hayata_py as hy
from hayata_py import langgraph as hylg


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def model_node(state: State) -> dict[str, Any]:
    """The chat model: it asks for the tool first, then answers from its result."""
    replies: list[Any] = [
        AIMessage(content="", tool_calls=[{"name": "weather", "args": {"city": "Paris"},
                                           "id": "call-1", "type": "tool_call"}]),
        AIMessage(content="It is sunny in Paris."),
    ]
    turn = sum(isinstance(m, AIMessage) for m in state["messages"])
    model = FakeMessagesListChatModel(responses=replies[turn:] or replies[-1:])
    return {"messages": [model.invoke(state["messages"])]}


def approve(state: State) -> dict[str, Any]:
    """Ask a person before the tool call runs (the thread waits durably)."""
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    answer = interrupt({"approve_tool_call": call})
    if answer != "yes":
        raise ValueError("tool call refused")
    return {}


builder = StateGraph(State)
builder.add_node("model", model_node)
builder.add_node("approve", approve)
builder.add_node("tools", ToolNode([weather]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition, {"tools": "approve", END: END})
builder.add_edge("approve", "tools")
builder.add_edge("tools", "model")


def main() -> None:
    with tempfile.TemporaryDirectory() as data, hy.AgentSystem(data) as system:
        # run as a script, this module is __main__: name the graph by its import path
        app = hylg.compile("examples.langgraph_chat:builder", system)
        config = {"configurable": {"thread_id": "user-42"}}
        paused = app.invoke({"messages": [("user", "weather in Paris?")]}, config)
        print("interrupt:", paused["__interrupt__"][0].value)
        final = app.invoke(Command(resume="yes"), config)
        print("answer:", final["messages"][-1].content)


if __name__ == "__main__":
    main()
