"""A node and a policy that hand the runtime values it must refuse, chosen by name.

The invocation input is ``{"policy": NAME, "node": NAME}``: the policy answers
:data:`POLICY_ANSWERS[NAME]` at step 0 (``"run"``: run node ``bad``, then
finish with its result), and node ``bad`` returns or streams
:data:`NODE_RESULTS[NAME]`. Values are built here, in the process that
returns them, since the input itself must be storable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hayata_py as hy


class Opaque:
    """A value of no type the store knows."""


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def _stream(partial: Any) -> Callable[[hy.NodeContext], Any]:
    def node(ctx: hy.NodeContext) -> Any:
        assert ctx.streamer is not None
        ctx.streamer(partial)
        return {"streamed": True}
    return node


NODE_RESULTS: dict[str, Callable[[hy.NodeContext], Any]] = {
    "ok": lambda ctx: {"fine": [1, "two", None]},
    "list": lambda ctx: [1, 2],
    "set": lambda ctx: {"tags": {"a", "b"}},
    "big_int": lambda ctx: {"n": 2**64},
    "int_key": lambda ctx: {"by_id": {1: "x"}},
    "object": lambda ctx: {"when": Opaque()},
    "cycle": lambda ctx: {"loop": _cycle()},
    "partial_list": _stream(["not", "a", "dict"]),
    "partial_object": _stream({"when": Opaque()}),
}

POLICY_ANSWERS: dict[str, Callable[[], Any]] = {
    "finish_object": lambda: hy.Finish({"when": Opaque()}),
    "next_int_key": lambda: hy.Next("bad", {1: "x"}),
    "next_object_node": lambda: hy.Next(Opaque()),  # type: ignore[arg-type]
    "none": lambda: None,
}


def bad(ctx: hy.NodeContext) -> Any:
    return NODE_RESULTS[ctx.input["node"]](ctx)


def policy(ctx: hy.PolicyContext) -> Any:
    name = ctx.input.get("policy", "run")
    if name != "run" and ctx.step == 0:
        return POLICY_ANSWERS[name]()
    if ctx.step == 0:
        return hy.Next("bad", ctx.input)
    return hy.Finish(ctx.last_result)
