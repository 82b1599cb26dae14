"""A LangGraph graph whose node writes ``custom`` chunks ``{"i": i}`` with
``get_stream_writer`` and, after each, waits for the file ``seen-<i>`` in the
state's ``dir``, which the test creates only once it has read that chunk: the
node finishes (``gates``) only if each chunk reached the caller while it ran;
else it gives up after ``GATE_WAIT`` seconds (``late``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

GATE_WAIT = 10.0


class GatedState(TypedDict, total=False):
    dir: str
    n: int
    gates: int
    late: int


def writer(state: GatedState) -> dict[str, Any]:
    write = get_stream_writer()
    for i in range(1, state["n"] + 1):
        write({"i": i})
        deadline = time.monotonic() + GATE_WAIT
        while not (Path(state["dir"]) / f"seen-{i}").exists():
            if time.monotonic() > deadline:
                return {"late": i}
            time.sleep(0.005)
    return {"gates": state["n"]}


gated = StateGraph(GatedState)
gated.add_node("writer", writer)
gated.add_edge(START, "writer")
gated.add_edge("writer", END)
