"""The graph agent-chat-ui talks to in ``make test-ui`` (tests/ui), served by
``langgraph.json`` beside this file: plain LangGraph with a fake chat model.

``agent`` answers each message from langchain_core's fake chat model (its
tokens stream in ``messages-tuple`` mode). A message containing ``slowly``
gets a first answer (:data:`SLOW_FIRST`), then a second node waits until the
file named by ``$HAYATA_UI_GATE`` exists (the test creates it when it has
seen what it wants mid-run) and answers :data:`SLOW_END`. A message
containing ``weather`` makes it call the ``weather`` tool, which it first asks
a person to approve with ``interrupt()`` in agent-chat-ui's own shape
(LangGraph's ``HumanInterrupt``: ``action_request`` and ``config``), so the
page shows an Accept button.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt

SLOW_FIRST = "Thinking it over, slowly."
SLOW_END = "Done thinking: the answer is 42."
WEATHER = "sunny in Paris"
GATE_ENV = "HAYATA_UI_GATE"
GATE_TIMEOUT = 120.0


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _reply(text: str, messages: Sequence[BaseMessage]) -> AIMessage:
    model = GenericFakeChatModel(messages=iter([AIMessage(content=text)]))
    reply = model.invoke(messages)
    assert isinstance(reply, AIMessage)
    return reply


def model(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [_reply(f"The tool says: {last.content}.", state["messages"])]}
    text = str(last.content) if isinstance(last, HumanMessage) else ""
    if "weather" in text:
        return {"messages": [AIMessage(content="Let me look that up.", tool_calls=[
            {"name": "weather", "args": {"city": "Paris"}, "id": "call-weather",
             "type": "tool_call"}])]}
    if "slowly" in text:
        return {"messages": [_reply(SLOW_FIRST, state["messages"])]}
    return {"messages": [_reply(f"You said: {text}", state["messages"])]}


def slow(state: MessagesState) -> dict[str, Any]:
    """Wait for the test's gate file, then answer :data:`SLOW_END`."""
    gate = Path(os.environ[GATE_ENV])
    deadline = time.monotonic() + GATE_TIMEOUT
    while not gate.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{gate} not created in {GATE_TIMEOUT}s")
        time.sleep(0.05)
    return {"messages": [_reply(SLOW_END, state["messages"])]}


def approve(state: MessagesState) -> dict[str, Any]:
    """Ask a person before the tool runs; refused, the tool's answer says so."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    call = last.tool_calls[0]
    answer = interrupt([{
        "action_request": {"action": call["name"], "args": call["args"]},
        "config": {"allow_accept": True, "allow_respond": False, "allow_edit": False,
                   "allow_ignore": False},
        "description": "May the agent call the weather tool?",
    }])
    response = answer[0] if isinstance(answer, list) else answer
    if isinstance(response, dict) and response.get("type") == "accept":
        return {}
    return {"messages": [ToolMessage(content="refused", tool_call_id=call["id"])]}


def route(state: MessagesState) -> Literal["approve", "slow", "__end__"]:
    last = state["messages"][-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        return "approve"
    return "slow" if last.content == SLOW_FIRST else "__end__"


def after_approval(state: MessagesState) -> Literal["tools", "model"]:
    return "model" if isinstance(state["messages"][-1], ToolMessage) else "tools"


agent = (
    StateGraph(MessagesState)
    .add_node("model", model)
    .add_node("approve", approve)
    .add_node("tools", ToolNode([weather]))
    .add_node("slow", slow)
    .add_edge(START, "model")
    .add_conditional_edges("model", route)
    .add_conditional_edges("approve", after_approval)
    .add_edge("tools", "model")
    .add_edge("slow", END)
    .compile()
)
