"""The graph ``bench_serve`` serves on both servers (``langgraph dev`` and
``hayata serve``), copied with a ``langgraph.json`` into each server's folder.

``bench``: three nodes in a row; the middle one is an ``async def`` waiting
``delay`` seconds (200 ms unless the input says). Every node appends
``"<label> <node> start"`` when it starts and ``"<label> <node> end"`` when it
ends to ``executions.log`` beside this file (one ``write`` of a short line
with ``O_APPEND``: whole lines, whichever process writes), so a benchmark
counts how many times each node of each run was executed, also across a kill.
Plain LangGraph only.
"""

from __future__ import annotations

import asyncio
import operator
import os
from pathlib import Path
from typing import Annotated, NotRequired, TypedDict

from langgraph.graph import END, START, StateGraph

LOG = Path(__file__).resolve().with_name("executions.log")


class BenchState(TypedDict):
    label: NotRequired[str]
    delay: NotRequired[float]
    steps: Annotated[list[str], operator.add]


def _note(state: BenchState, node: str, phase: str) -> None:
    line = f"{state.get('label', '-')} {node} {phase}\n".encode()
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def first(state: BenchState) -> dict[str, list[str]]:
    _note(state, "first", "start")
    _note(state, "first", "end")
    return {"steps": ["first"]}


async def middle(state: BenchState) -> dict[str, list[str]]:
    _note(state, "middle", "start")
    await asyncio.sleep(state.get("delay", 0.2))
    _note(state, "middle", "end")
    return {"steps": ["middle"]}


def last(state: BenchState) -> dict[str, list[str]]:
    _note(state, "last", "start")
    _note(state, "last", "end")
    return {"steps": ["last"]}


bench = (
    StateGraph(BenchState)
    .add_node("first", first)
    .add_node("middle", middle)
    .add_node("last", last)
    .add_edge(START, "first")
    .add_edge("first", "middle")
    .add_edge("middle", "last")
    .add_edge("last", END)
    .compile()
)
