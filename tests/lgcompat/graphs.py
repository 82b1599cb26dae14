"""Graphs built from LangGraph's documented patterns, run by both runtimes in the
differential suite. Each counts its nodes' runs in files under ``$LGCOMPAT_DIR``
(when set), so a test can see which nodes really ran."""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.config import get_store, get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import CachePolicy, Command, RetryPolicy, Send, interrupt
from typing_extensions import TypedDict


def _count(name: str) -> None:
    folder = os.environ.get("LGCOMPAT_DIR")
    if folder:
        with Path(folder, f"{name}.runs").open("a") as fh:
            fh.write("x")


# --- a sequence ------------------------------------------------------------------

class SeqState(TypedDict):
    text: str
    steps: Annotated[list[str], operator.add]


def seq_a(state: SeqState) -> dict[str, Any]:
    _count("seq_a")
    return {"text": state["text"] + "a", "steps": ["a"]}


def seq_b(state: SeqState) -> dict[str, Any]:
    _count("seq_b")
    get_stream_writer()({"progress": "b"})
    return {"text": state["text"] + "b", "steps": ["b"]}


def seq_c(state: SeqState) -> dict[str, Any]:
    _count("seq_c")
    return {"text": state["text"] + "c", "steps": ["c"]}


sequence = StateGraph(SeqState)
sequence.add_node("a", seq_a)
sequence.add_node("b", seq_b)
sequence.add_node("c", seq_c)
sequence.add_edge(START, "a")
sequence.add_edge("a", "b")
sequence.add_edge("b", "c")
sequence.add_edge("c", END)


# --- a conditional branch ------------------------------------------------------------

class BranchState(TypedDict):
    n: int
    route: str


def classify(state: BranchState) -> dict[str, Any]:
    return {"route": "big" if state["n"] > 10 else "small"}


def route(state: BranchState) -> str:
    return state["route"]


branch = StateGraph(BranchState)
branch.add_node("classify", classify)
branch.add_node("big", lambda state: {"n": state["n"] * 2})
branch.add_node("small", lambda state: {"n": state["n"] + 1})
branch.add_edge(START, "classify")
branch.add_conditional_edges("classify", route, {"big": "big", "small": "small"})
branch.add_edge("big", END)
branch.add_edge("small", END)


# --- fan-out, fan-in with a reducer --------------------------------------------------

class FanState(TypedDict):
    topic: str
    parts: Annotated[list[str], operator.add]
    summary: str


def fan_start(state: FanState) -> dict[str, Any]:
    return {"parts": [f"start:{state['topic']}"]}


def fan_join(state: FanState) -> dict[str, Any]:
    return {"summary": "+".join(sorted(state["parts"]))}


fanout = StateGraph(FanState)
fanout.add_node("start", fan_start)
for _name in ("x", "y", "z"):
    fanout.add_node(_name, lambda state, _n=_name: {"parts": [_n]})
    fanout.add_edge("start", _name)
fanout.add_node("join", fan_join)
fanout.add_edge(START, "start")
fanout.add_edge(["x", "y", "z"], "join")
fanout.add_edge("join", END)


# --- map-reduce with Send ----------------------------------------------------------

class MapState(TypedDict):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]
    best: str


class JokeState(TypedDict):
    subject: str


def continue_to_jokes(state: MapState) -> list[Send]:
    return [Send("joke", {"subject": s}) for s in state["subjects"]]


def joke(state: JokeState) -> dict[str, Any]:
    return {"jokes": [f"joke about {state['subject']}"]}


def best(state: MapState) -> dict[str, Any]:
    return {"best": sorted(state["jokes"])[0]}


mapreduce = StateGraph(MapState)
mapreduce.add_node("joke", joke)
mapreduce.add_node("best", best)
mapreduce.add_conditional_edges(START, continue_to_jokes, ["joke"])
mapreduce.add_edge("joke", "best")
mapreduce.add_edge("best", END)


# --- Command(goto, update) from a node ---------------------------------------------

class GotoState(TypedDict):
    value: int
    visited: Annotated[list[str], operator.add]


def chooser(state: GotoState) -> Command[Literal["left", "right"]]:
    target: Literal["left", "right"] = "left" if state["value"] % 2 == 0 else "right"
    return Command(goto=target, update={"value": state["value"] + 100, "visited": ["chooser"]})


goto = StateGraph(GotoState)
goto.add_node("chooser", chooser)
goto.add_node("left", lambda state: {"visited": ["left"]})
goto.add_node("right", lambda state: {"visited": ["right"]})
goto.add_edge(START, "chooser")


# --- interrupt() twice in one node ---------------------------------------------------

class AskState(TypedDict):
    question: str
    answers: Annotated[list[str], operator.add]
    done: bool


def ask(state: AskState) -> dict[str, Any]:
    _count("ask")
    first = interrupt({"ask": "name?", "q": state["question"]})
    second = interrupt({"ask": "age?"})
    return {"answers": [str(first), str(second)]}


def finish(state: AskState) -> dict[str, Any]:
    _count("finish")
    return {"done": True}


approval = StateGraph(AskState)
approval.add_node("ask", ask)
approval.add_node("finish", finish)
approval.add_edge(START, "ask")
approval.add_edge("ask", "finish")
approval.add_edge("finish", END)


# --- a loop that never ends (recursion limit) ----------------------------------------

class LoopState(TypedDict):
    count: int


forever = StateGraph(LoopState)
forever.add_node("tick", lambda state: {"count": state["count"] + 1})
forever.add_edge(START, "tick")
forever.add_conditional_edges("tick", lambda state: "tick" if state["count"] < 1000 else END)


# --- a loop whose list is a DeltaChannel (its checkpoints store writes, not values) ---

def _extend(state: list[str], writes: Any) -> list[str]:
    return [*state, *(item for write in writes for item in write)]


class DeltaState(TypedDict):
    items: Annotated[list[str], DeltaChannel(_extend)]
    left: int


deltas = StateGraph(DeltaState)
deltas.add_node("add", lambda state: {"items": [f"i{len(state['items'])}"],
                                      "left": state["left"] - 1})
deltas.add_edge(START, "add")
deltas.add_conditional_edges("add", lambda state: "add" if state["left"] > 0 else END)


# --- a chat model with tools (add_messages, ToolNode, tools_condition) ---------------

class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def fake_model(state: ChatState) -> dict[str, Any]:
    """A deterministic stand-in for a chat model: it calls the tool once, then answers."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(content=f"the weather is {last.content}",
                                       id=f"ai-{len(state['messages'])}")]}
    return {"messages": [AIMessage(content="", id=f"ai-{len(state['messages'])}", tool_calls=[
        {"name": "weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}])]}


def _tools_node() -> Any:
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return ToolNode([weather])


def _tools_condition(state: ChatState) -> str:
    from langgraph.prebuilt import tools_condition
    result: str = tools_condition(state)  # type: ignore[arg-type]
    return result


chat = StateGraph(ChatState)
chat.add_node("model", fake_model)
chat.add_node("tools", _tools_node())
chat.add_edge(START, "model")
chat.add_conditional_edges("model", _tools_condition, {"tools": "tools", "__end__": END})
chat.add_edge("tools", "model")


# --- a node that waits for the test to let it go (crash tests) -----------------------

class SlowState(TypedDict):
    steps: Annotated[list[str], operator.add]


def slow_a(state: SlowState) -> dict[str, Any]:
    _count("slow_a")
    return {"steps": ["a"]}


def slow_b(state: SlowState) -> dict[str, Any]:
    """Marks that it started, then waits until the test releases it (at most 60 s)."""
    import time

    _count("slow_b")
    folder = Path(os.environ["LGCOMPAT_DIR"])
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"steps": ["b"]}


def slow_c(state: SlowState) -> dict[str, Any]:
    _count("slow_c")
    return {"steps": ["c"]}


slow = StateGraph(SlowState)
slow.add_node("a", slow_a)
slow.add_node("b", slow_b)
slow.add_node("c", slow_c)
slow.add_edge(START, "a")
slow.add_edge("a", "b")
slow.add_edge("b", "c")
slow.add_edge("c", END)


def wide_quick(state: SlowState) -> dict[str, Any]:
    _count("wide_quick")
    return {"steps": ["quick"]}


def wide_slow(state: SlowState) -> dict[str, Any]:
    """Beside ``wide_quick`` in one superstep: writes a custom chunk, then waits
    until the test releases it (at most 60 s)."""
    import time

    _count("wide_slow")
    get_stream_writer()({"slow": "working"})
    folder = Path(os.environ["LGCOMPAT_DIR"])
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"steps": ["slow"]}


def wide_join(state: SlowState) -> dict[str, Any]:
    _count("wide_join")
    return {"steps": ["join"]}


wide = StateGraph(SlowState)
wide.add_node("quick", wide_quick)
wide.add_node("slow", wide_slow)
wide.add_node("join", wide_join)
wide.add_edge(START, "quick")
wide.add_edge(START, "slow")
wide.add_edge(["quick", "slow"], "join")
wide.add_edge("join", END)


# --- a LangChain chat model's tokens (messages mode) ---------------------------------

def talk(state: ChatState) -> dict[str, Any]:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([AIMessage(content="hello there friend",
                                                          id="ai-talk")]))
    return {"messages": [model.invoke(state["messages"])]}


talker = StateGraph(ChatState)
talker.add_node("talk", talk)
talker.add_edge(START, "talk")
talker.add_edge("talk", END)


# --- a node that fails until a file exists (errors and resuming after them) -----------

class FlakyState(TypedDict):
    steps: Annotated[list[str], operator.add]


class FlakyError(ValueError):
    """What the flaky node raises."""


def flaky_b(state: FlakyState) -> dict[str, Any]:
    _count("flaky_b")
    if not Path(os.environ["LGCOMPAT_DIR"], "flaky.ok").exists():
        raise FlakyError("b is not ready")
    return {"steps": ["b"]}


flaky = StateGraph(FlakyState)
flaky.add_node("a", lambda state: {"steps": ["a"]})
flaky.add_node("b", flaky_b)
flaky.add_node("side", lambda state: {"steps": ["side"]})
flaky.add_edge(START, "a")
flaky.add_edge("a", "b")
flaky.add_edge("a", "side")
flaky.add_edge(["b", "side"], END)


# --- one superstep with Sends to a node and a plain edge to another ------------------

def fan_mixed(state: MapState) -> list[Send]:
    return [Send("joke", {"subject": s}) for s in state["subjects"]]


mixed = StateGraph(MapState)
mixed.add_node("plan", lambda state: {"jokes": ["plan"]})
mixed.add_node("joke", joke)
mixed.add_node("other", lambda state: {"jokes": ["other"]})
mixed.add_edge(START, "plan")
mixed.add_conditional_edges("plan", fan_mixed, ["joke"])
mixed.add_edge("plan", "other")
mixed.add_node("best", best)
mixed.add_edge(["joke", "other"], "best")
mixed.add_edge("best", END)


# --- a node with a retry policy -------------------------------------------------------

class RetryState(TypedDict):
    tries: int


def shaky(state: RetryState) -> dict[str, Any]:
    """Fails until it has run 3 times on this state's key (counted in a file)."""
    folder = Path(os.environ["LGCOMPAT_DIR"])
    key = folder / f"shaky-{state['tries']}.runs"
    with key.open("a") as fh:
        fh.write("x")
    if len(key.read_text()) < 3:
        raise ConnectionError("flaky network")
    return {"tries": state["tries"] + 1000}


retrying = StateGraph(RetryState)
retrying.add_node("shaky", shaky, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01,
                                                           jitter=False))
retrying.add_edge(START, "shaky")
retrying.add_edge("shaky", END)

exhausted = StateGraph(RetryState)
exhausted.add_node("shaky", shaky, retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01,
                                                            retry_on=ConnectionError))
exhausted.add_edge(START, "shaky")
exhausted.add_edge("shaky", END)


# --- async def nodes ------------------------------------------------------------------

async def slow_echo(state: SeqState) -> dict[str, Any]:
    import asyncio

    await asyncio.sleep(0.01)
    get_stream_writer()({"async": state["text"]})
    return {"text": state["text"] + "!", "steps": ["echo"]}


asyncgraph = StateGraph(SeqState)
asyncgraph.add_node("echo", slow_echo)
asyncgraph.add_node("c", seq_c)
asyncgraph.add_edge(START, "echo")
asyncgraph.add_edge("echo", "c")
asyncgraph.add_edge("c", END)


# --- a node option hayata does not carry over (refused at compile) -------------------

cached = StateGraph(SeqState)
cached.add_node("a", seq_a, cache_policy=CachePolicy(ttl=60))
cached.add_edge(START, "a")


# --- two nodes writing one plain channel in one superstep (InvalidUpdateError) --------

class PlainState(TypedDict):
    value: str


clash = StateGraph(PlainState)
clash.add_node("one", lambda state: {"value": "one"})
clash.add_node("two", lambda state: {"value": "two"})
clash.add_edge(START, "one")
clash.add_edge(START, "two")


# --- a compiled subgraph as a node --------------------------------------------------------

inner = StateGraph(SeqState)
inner.add_node("x", lambda state: {"text": state["text"] + "x", "steps": ["x"]})
inner.add_node("y", lambda state: {"text": state["text"] + "y", "steps": ["y"]})
inner.add_edge(START, "x")
inner.add_edge("x", "y")
inner_graph = inner.compile()

outer = StateGraph(SeqState)
outer.add_node("a", seq_a)
outer.add_node("sub", inner_graph)
outer.add_node("c", seq_c)
outer.add_edge(START, "a")
outer.add_edge("a", "sub")
outer.add_edge("sub", "c")


# --- two nodes interrupting in one superstep ---------------------------------------------

class TwoAsksState(TypedDict):
    answers: Annotated[list[str], operator.add]


def ask_left(state: TwoAsksState) -> dict[str, Any]:
    return {"answers": [f"left:{interrupt('left?')}"]}


def ask_right(state: TwoAsksState) -> dict[str, Any]:
    return {"answers": [f"right:{interrupt('right?')}"]}


two_asks = StateGraph(TwoAsksState)
two_asks.add_node("left", ask_left)
two_asks.add_node("right", ask_right)
two_asks.add_edge(START, "left")
two_asks.add_edge(START, "right")


async def atalk(state: ChatState) -> dict[str, Any]:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([AIMessage(content="async tokens here",
                                                          id="ai-atalk")]))
    return {"messages": [await model.ainvoke(state["messages"])]}


atalker = StateGraph(ChatState)
atalker.add_node("talk", atalk)
atalker.add_edge(START, "talk")
atalker.add_edge("talk", END)


# --- input and output schemas ----------------------------------------------------------

class InSchema(TypedDict):
    question: str


class OutSchema(TypedDict):
    answer: str


class AllState(TypedDict):
    question: str
    scratch: str
    answer: str


schemas = StateGraph(AllState, input_schema=InSchema, output_schema=OutSchema)
schemas.add_node("think", lambda state: {"scratch": state["question"].upper()})
schemas.add_node("reply", lambda state: {"answer": state["scratch"] + "!"})
schemas.add_edge(START, "think")
schemas.add_edge("think", "reply")
schemas.add_edge("reply", END)


# --- Sends that interrupt, beside a plain edge in one superstep ------------------------

class AskItemState(TypedDict):
    item: str


def ask_item(state: AskItemState) -> dict[str, Any]:
    return {"jokes": [f"{state['item']}:{interrupt(state['item'])}"]}


def fan_asks(state: MapState) -> list[Send]:
    return [Send("ask_item", {"item": s}) for s in state["subjects"]]


mixed_asks = StateGraph(MapState)
mixed_asks.add_node("plan", lambda state: {"jokes": ["plan"]})
mixed_asks.add_node("ask_item", ask_item)
mixed_asks.add_node("other", lambda state: {"jokes": ["other"]})
mixed_asks.add_edge(START, "plan")
mixed_asks.add_conditional_edges("plan", fan_asks, ["ask_item"])
mixed_asks.add_edge("plan", "other")


# --- an interrupt() inside a subgraph ----------------------------------------------------

def inner_ask(state: SeqState) -> dict[str, Any]:
    said = interrupt("inner?")
    return {"text": state["text"] + str(said), "steps": ["inner"]}


def inner_first(state: SeqState) -> dict[str, Any]:
    _count("inner_first")
    return {"steps": ["first"]}


asking_inner = StateGraph(SeqState)
asking_inner.add_node("inner_first", inner_first)
asking_inner.add_node("inner_ask", inner_ask)
asking_inner.add_edge(START, "inner_first")
asking_inner.add_edge("inner_first", "inner_ask")
asking_inner_graph = asking_inner.compile()

outer_ask = StateGraph(SeqState)
outer_ask.add_node("a", seq_a)
outer_ask.add_node("sub", asking_inner_graph)
outer_ask.add_edge(START, "a")
outer_ask.add_edge("a", "sub")


# --- a runtime context (context_schema, a node taking the runtime) --------------------------

@dataclass
class Who:
    user: str


def greet(state: SeqState, runtime: Runtime[Who]) -> dict[str, Any]:
    return {"text": f"hello {runtime.context.user}", "steps": ["greet"]}


with_context = StateGraph(SeqState, context_schema=Who)
with_context.add_node("greet", greet)
with_context.add_edge(START, "greet")


# --- compiled graphs given to hylg.compile ------------------------------------------------

compiled_with_breakpoint = sequence.compile(interrupt_before=["b"])
compiled_with_store = sequence.compile(store=InMemoryStore())


# --- nodes using LangGraph's store (get_store(), runtime.store, a store parameter) ---------

class MemoState(TypedDict):
    user: str
    log: Annotated[list[Any], operator.add]


def memo_put(state: MemoState) -> dict[str, Any]:
    store = get_store()
    seed = store.get(("memo", state["user"]), "seed")
    for n in (1, 2, 3):
        store.put(("memo", state["user"], "notes"), f"k{n}", {"n": n, "text": f"note {n}"})
    store.put(("memo", state["user"], "notes"), "k2", {"n": 20, "text": "note 2 again"})
    return {"log": [["seed", seed.value if seed is not None else None]]}


def memo_get(state: MemoState, runtime: Runtime[None]) -> dict[str, Any]:
    store = runtime.store
    assert store is not None
    item = store.get(("memo", state["user"], "notes"), "k2")
    assert item is not None
    found = store.search(("memo", state["user"], "notes"), filter={"n": {"$gte": 2}})
    everything = store.search(("memo", state["user"]), limit=2, offset=1)
    names = store.list_namespaces(prefix=("memo", state["user"]))
    short = store.list_namespaces(prefix=("memo", state["user"]), max_depth=2)
    return {"log": [["get", item.namespace, item.key, item.value],
                    ["search", sorted((i.key, i.value["n"], i.score) for i in found)],
                    ["page", len(everything)], ["namespaces", names], ["depth", short]]}


def memo_forget(state: MemoState, store: BaseStore) -> dict[str, Any]:
    store.delete(("memo", state["user"], "notes"), "k1")
    keys = sorted(i.key for i in store.search(("memo", state["user"], "notes")))
    return {"log": [["after delete", keys, store.get(("memo", state["user"], "notes"), "k1")]]}


async def memo_async(state: MemoState) -> dict[str, Any]:
    store = get_store()
    await store.aput(("memo", state["user"]), "async", {"n": 0})
    item = await store.aget(("memo", state["user"]), "async")
    found = await store.asearch(("memo", state["user"]), filter={"n": 0})
    return {"log": [["async", item.value if item else None, [i.key for i in found]]]}


memo = StateGraph(MemoState)
memo.add_node("put", memo_put)
memo.add_node("get", memo_get)
memo.add_node("forget", memo_forget)
memo.add_node("aside", memo_async)
memo.add_edge(START, "put")
memo.add_edge("put", "get")
memo.add_edge("get", "forget")
memo.add_edge("forget", "aside")

shared_in_memory = InMemoryStore()
"""A store each process would have its own of (refused by hylg.compile)."""

STORE_URL = ""
"""The database of :func:`hayata_store` (tests set it)."""


def hayata_store() -> BaseStore:
    """A store by path: a function every process calls once."""
    from hayata_py.langgraph import HayataStore

    return HayataStore(STORE_URL)


EMBEDDED: list[str] = []
"""The texts :func:`embed_words` embedded in this process."""


def embed_words(texts: list[str]) -> list[list[float]]:
    """A stand-in embedding: how often each of four words occurs, and a bias."""
    EMBEDDED.extend(texts)
    return [[text.count(word) + 0.0 for word in ("cat", "dog", "fish", "bird")] + [0.3]
            for text in texts]


INDEX = {"embed": embed_words, "dims": 5, "fields": ["text"]}


async def aembed_words(texts: list[str]) -> list[list[float]]:
    """:func:`embed_words` as an ``async def``."""
    return embed_words(texts)


ASYNC_INDEX = {"embed": aembed_words, "dims": 5, "fields": ["text"]}


def seek(state: MemoState) -> dict[str, Any]:
    found = get_store().search(("memo", state["user"]), query="a dog and a cat", limit=3)
    return {"log": [[(i.key, None if i.score is None else round(i.score, 9)) for i in found]]}


seeker = StateGraph(MemoState)
seeker.add_node("seek", seek)
seeker.add_edge(START, "seek")
