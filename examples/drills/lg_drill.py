"""Drill 12: a LangGraph graph (``hylg.compile``) cut off by kill -9 of the
whole system while a node runs.

The graph: ``plan`` -> ``charge`` -> ``notify``; every node appends
``start <node> <pid>`` and ``end <node> <pid>`` to ``$D/lg-effects.log``;
``charge`` waits for the gate file ``$D/lg-gate`` (a payment call in flight).

    python -m examples.drills.lg_drill crash     # run, kill -9 the system inside charge
    python -m examples.drills.lg_drill recover   # restart: invoke(None) -> TaskUncertain
    python -m examples.drills.lg_drill resolve   # say charge completed: the run goes on
"""

from __future__ import annotations

import operator
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

import hayata_py as hy
from hayata_py import langgraph as hylg

D = Path(os.environ.get("D", "/tmp/hayata-drills"))
CONFIG = {"configurable": {"thread_id": "order-7"}}


class Order(TypedDict):
    log: Annotated[list[str], operator.add]


def _effect(event: str, node: str) -> None:
    with (D / "lg-effects.log").open("a") as fh:
        fh.write(f"{event} {node} {os.getpid()}\n")


def plan(state: Order) -> dict[str, Any]:
    _effect("start", "plan")
    _effect("end", "plan")
    return {"log": ["planned"]}


def charge(state: Order) -> dict[str, Any]:
    _effect("start", "charge")
    while not (D / "lg-gate").exists():
        time.sleep(0.01)  # the payment provider's call, until the drill opens the gate
    _effect("end", "charge")
    return {"log": ["charged"]}


def notify(state: Order) -> dict[str, Any]:
    _effect("start", "notify")
    _effect("end", "notify")
    return {"log": ["notified"]}


builder = StateGraph(Order)
builder.add_node("plan", plan)
builder.add_node("charge", charge)
builder.add_node("notify", notify)
builder.add_edge(START, "plan")
builder.add_edge("plan", "charge")
builder.add_edge("charge", "notify")
builder.add_edge("notify", END)


def _started(node: str) -> bool:
    log = D / "lg-effects.log"
    return log.exists() and f"start {node} " in log.read_text()


def crash() -> None:
    system = hy.AgentSystem(D / "lg-data")
    app = hylg.compile("examples.drills.lg_drill:builder", system, id="order")
    threading.Thread(target=lambda: app.invoke({"log": []}, CONFIG), daemon=True).start()
    while not _started("charge"):
        time.sleep(0.01)
    print("charge is running; kill -9 of every process of the system:",
          sorted(system.kill()))


def recover(*, uncertain: str = "raise") -> hylg.HayataGraph:
    system = hy.AgentSystem(D / "lg-data")
    return hylg.compile("examples.drills.lg_drill:builder", system, id="order",
                        uncertain=uncertain)


def main() -> None:
    step = sys.argv[1] if len(sys.argv) > 1 else "crash"
    if step == "crash":
        crash()
        return
    app = recover(uncertain="interrupt" if step == "resolve" else "raise")
    try:
        if step == "recover":
            try:
                app.invoke(None, CONFIG)
            except hylg.TaskUncertain as exc:
                print(f"TaskUncertain ({exc.code}): {exc}")
                print("details:", {k: exc.details[k] for k in ("nodes", "task_ids")})
            print("state:", app.get_state(CONFIG).values, "next:", app.get_state(CONFIG).next)
        else:
            asked = app.invoke(None, CONFIG)
            print("asked:", asked["__interrupt__"][0].value["uncertain"]["node"],
                  asked["__interrupt__"][0].value["uncertain"]["input"])
            final = app.invoke(Command(resume={"completed": {"log": ["charged"]}}), CONFIG)
            print("final:", final)
    finally:
        app.system.shutdown()


if __name__ == "__main__":
    main()
