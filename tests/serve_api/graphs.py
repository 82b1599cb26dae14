"""The graphs the serve_api conformance suite runs, served by ``langgraph.json`` beside this file.

Plain LangGraph (``langgraph`` and ``langchain_core`` only), so LangGraph's own
server and ``hayata serve`` load the same file:

- ``steps``: three nodes in a row, each appending ``"<label>:<node>"`` to
  ``steps``; the middle one is ``async`` and waits ``delay`` seconds (0 unless
  the input says), which keeps a run busy for the cancel and multitask tests.
- ``ask``: asks with ``interrupt()`` and stores the answer it is resumed with.
- ``chat``: answers from langchain_core's fake chat model (its tokens stream
  in ``messages-tuple`` mode) and writes two ``custom`` events around the call.
- ``nested``: a node ``before``, then the subgraph ``inner`` (nodes ``one``
  and ``two``) as a node, then ``chat`` as a subgraph node ``talk``; each of
  ``before``/``one``/``two`` appends its name to ``trail``; what the
  ``stream_subgraphs`` tests stream.
- ``recall``: one node that searches the store (``get_store()``) under
  ``namespace`` for ``query`` and keeps the keys and scores it found.

``embed`` is the store's embedding function (``store.index`` in
``langgraph.json``): a word's letters hashed into 16 dimensions, so texts
that share words score close, with no model and the same on both servers.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, NotRequired, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.config import get_store, get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

#: What the ``chat`` graph's model answers, every time.
CHAT_REPLY = "hello from the fake model"


class StepsState(TypedDict):
    label: NotRequired[str]
    delay: NotRequired[float]
    steps: Annotated[list[str], operator.add]


def _mark(state: StepsState, node: str) -> dict[str, list[str]]:
    return {"steps": [f"{state.get('label', '')}:{node}"]}


def first(state: StepsState) -> dict[str, list[str]]:
    return _mark(state, "first")


async def middle(state: StepsState) -> dict[str, list[str]]:
    await asyncio.sleep(state.get("delay", 0.0))
    return _mark(state, "middle")


def last(state: StepsState) -> dict[str, list[str]]:
    return _mark(state, "last")


steps = (
    StateGraph(StepsState)
    .add_node("first", first)
    .add_node("middle", middle)
    .add_node("last", last)
    .add_edge(START, "first")
    .add_edge("first", "middle")
    .add_edge("middle", "last")
    .add_edge("last", END)
    .compile()
)


class AskState(TypedDict):
    question: str
    answer: NotRequired[str]
    done: NotRequired[bool]


def ask_node(state: AskState) -> dict[str, Any]:
    return {"answer": interrupt({"question": state["question"]})}


def finish(state: AskState) -> dict[str, Any]:
    return {"done": True}


ask = (
    StateGraph(AskState)
    .add_node("ask", ask_node)
    .add_node("finish", finish)
    .add_edge(START, "ask")
    .add_edge("ask", "finish")
    .add_edge("finish", END)
    .compile()
)


def respond(state: MessagesState) -> dict[str, Any]:
    write = get_stream_writer()
    write({"progress": "thinking"})
    model = GenericFakeChatModel(messages=iter([AIMessage(content=CHAT_REPLY)]))
    reply = model.invoke(state["messages"])
    write({"progress": "done"})
    return {"messages": [reply]}


chat = (
    StateGraph(MessagesState)
    .add_node("respond", respond)
    .add_edge(START, "respond")
    .add_edge("respond", END)
    .compile()
)


class NestedState(MessagesState):
    trail: NotRequired[str]


def _trail(state: NestedState, node: str) -> dict[str, str]:
    return {"trail": f"{state.get('trail', '')}>{node}"}


inner = (
    StateGraph(NestedState)
    .add_node("one", lambda state: _trail(state, "one"))
    .add_node("two", lambda state: _trail(state, "two"))
    .add_edge(START, "one")
    .add_edge("one", "two")
    .add_edge("two", END)
    .compile()
)

nested = (
    StateGraph(NestedState)
    .add_node("before", lambda state: _trail(state, "before"))
    .add_node("inner", inner)
    .add_node("talk", chat)
    .add_edge(START, "before")
    .add_edge("before", "inner")
    .add_edge("inner", "talk")
    .add_edge("talk", END)
    .compile()
)


#: Dimensions of :func:`embed`'s vectors (``store.index.dims``).
EMBED_DIMS = 16


async def embed(texts: list[str]) -> list[list[float]]:
    """Each text as counts of its words hashed into :data:`EMBED_DIMS` slots
    (a word's hash: the sum of its letters' code points), plus one in the
    last slot so no vector is all zeros."""
    vectors = []
    for text in texts:
        vector = [0.0] * EMBED_DIMS
        for word in text.lower().split():
            vector[sum(map(ord, word)) % (EMBED_DIMS - 1)] += 1.0
        vector[-1] = 1.0
        vectors.append(vector)
    return vectors


class RecallState(TypedDict):
    namespace: list[str]
    query: str
    found: NotRequired[list[list[Any]]]


def search_store(state: RecallState) -> dict[str, Any]:
    found = get_store().search(tuple(state["namespace"]), query=state["query"], limit=3)
    return {"found": [[item.key, item.score] for item in found]}


recall = (
    StateGraph(RecallState)
    .add_node("search_store", search_store)
    .add_edge(START, "search_store")
    .add_edge("search_store", END)
    .compile()
)
