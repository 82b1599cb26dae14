"""The compensation drill: a booking flow that fails after it charged a card.

``charge_card`` -> ``book_hotel`` -> ``fly``; with ``"fail": true`` in the
input, ``fly`` raises, and the agent undoes what completed, latest first:
``cancel_hotel`` for ``book_hotel``, then ``refund`` for ``charge_card``
(``AgentConfig.compensate``). Every node and compensator appends
``start <name> <pid>`` before its work and ``end <name> <pid>`` after it to
the input's ``effects`` file, and waits for a gate file first if the input's
``gates`` name one for it (``{"gates": {"refund": "/path"}}``), which is how
the drill holds a refund in flight while it kills the system.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import hayata_py as hy


def _effect(data: dict[str, Any], *fields: object) -> None:
    with open(data["effects"], "a") as f:
        f.write(" ".join(map(str, (*fields, os.getpid()))) + "\n")
        f.flush()
        os.fsync(f.fileno())  # survives a kill -9 the moment after


def _do(name: str, data: dict[str, Any]) -> None:
    _effect(data, "start", name)
    gate = data.get("gates", {}).get(name)
    while gate and not Path(gate).exists():
        time.sleep(0.005)  # the payment provider's call, until the drill opens the gate
    _effect(data, "end", name)


def charge_card(ctx: hy.NodeContext) -> dict[str, Any]:
    _do("charge_card", ctx.input)
    return {"charge": "ch_1", "amount": ctx.input.get("amount", 120)}


def book_hotel(ctx: hy.NodeContext) -> dict[str, Any]:
    _do("book_hotel", ctx.input)
    return {"booking": "H-7"}


def fly(ctx: hy.NodeContext) -> dict[str, Any]:
    _do("fly", ctx.input)
    if ctx.input.get("fail"):
        raise RuntimeError("no seats left on the flight")
    return {"flight": "F-1"}


def refund(ctx: hy.NodeContext) -> dict[str, Any]:
    """Undo ``charge_card``: ``ctx.input`` has its ``task_id``, ``input`` and ``result``."""
    _do("refund", ctx.input["input"])
    return {"refunded": ctx.input["result"]["charge"]}


def cancel_hotel(ctx: hy.NodeContext) -> dict[str, Any]:
    _do("cancel_hotel", ctx.input["input"])
    return {"cancelled": ctx.input["result"]["booking"]}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    steps = ("charge_card", "book_hotel", "fly")
    if ctx.step < len(steps):
        return hy.Next(steps[ctx.step], ctx.input)
    return hy.Finish(dict(ctx.state))


config = hy.AgentConfig(
    "booking", {"charge_card": charge_card, "book_hotel": book_hotel, "fly": fly}, policy,
    compensate={"charge_card": refund, "book_hotel": cancel_hotel}, execution_timeout=120.0)
"""For ``hayata agent start examples.drills.booking:config``."""
