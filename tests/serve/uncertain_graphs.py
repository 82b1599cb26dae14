"""A graph for the ``/hayata/`` tests (tests/serve/test_resolve.py), served by
module path: ``fanout`` runs ``left`` and ``right`` in parallel, then ``join``.
``left`` and ``right`` each append their name to the file ``effects`` names
(one line a start), then wait until the file ``gate`` names exists (at most
60 s), so a crash catches both in flight and a re-run ends at once once the
gate is open.
"""

from __future__ import annotations

import asyncio
import operator
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph


class FanState(TypedDict):
    gate: str
    effects: str
    steps: Annotated[list[str], operator.add]


async def _held(state: FanState, node: str) -> dict[str, Any]:
    with Path(state["effects"]).open("a") as out:
        out.write(f"{node}\n")
    deadline = time.monotonic() + 60
    while not Path(state["gate"]).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return {"steps": [node]}


async def left(state: FanState) -> dict[str, Any]:
    return await _held(state, "left")


async def right(state: FanState) -> dict[str, Any]:
    return await _held(state, "right")


def join(state: FanState) -> dict[str, Any]:
    return {"steps": ["join"]}


fanout = (
    StateGraph(FanState)
    .add_node("left", left)
    .add_node("right", right)
    .add_node("join", join)
    .add_edge(START, "left")
    .add_edge(START, "right")
    .add_edge(["left", "right"], "join")
    .add_edge("join", END)
    .compile()
)
