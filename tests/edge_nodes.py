"""Node functions of the edges-on-demand and async-edge tests (module level:
importable by the edges).

``sleeper`` (``async def``) is driven by its input, a dict (or anything else:
no options): ``dir`` (a directory: write ``start-<item>-<task>-<attempt>-<pid>`` there
when it starts and ``end-...`` when it ends), ``expect`` (then wait until that
many ``start-`` files exist: proof that so many ran at once), ``gate`` (wait
until that file exists), ``sleep`` (seconds to ``await asyncio.sleep``),
``block`` (seconds to block the whole loop with ``time.sleep``), ``stream``
(partials to publish), ``raise`` (a message to raise with). Every wait gives up
after 60 s. ``plain`` is the same as a sync function (one task per edge).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import hayata_py as hy
from supervisors import SupervisedActor


def _spec(ctx: hy.NodeContext) -> dict[str, Any]:
    return ctx.input if isinstance(ctx.input, dict) else {}


def _note(spec: dict[str, Any], ctx: hy.NodeContext, event: str) -> None:
    if spec.get("dir"):
        name = f"{event}-{ctx.item}-{ctx.task_id[:12]}-{ctx.attempt}-{os.getpid()}"
        (Path(spec["dir"]) / name).touch()


def _starts(spec: dict[str, Any]) -> int:
    return sum(1 for p in Path(spec["dir"]).iterdir() if p.name.startswith("start-"))


async def sleeper(ctx: hy.NodeContext) -> dict[str, Any]:
    spec = _spec(ctx)
    _note(spec, ctx, "start")
    deadline = time.monotonic() + 60
    if "expect" in spec:
        while _starts(spec) < spec["expect"] and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    if "gate" in spec:
        while not Path(spec["gate"]).exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    if "sleep" in spec:
        await asyncio.sleep(spec["sleep"])
    if "block" in spec:
        time.sleep(spec["block"])
    for i in range(spec.get("stream", 0)):
        if ctx.streamer is not None:
            ctx.streamer({"token": i, "item": ctx.item})
        await asyncio.sleep(0)
    if "raise" in spec:
        raise RuntimeError(spec["raise"])
    _note(spec, ctx, "end")
    return {"item": ctx.item, "pid": os.getpid(), "value": spec.get("value")}


def plain(ctx: hy.NodeContext) -> dict[str, Any]:
    spec = _spec(ctx)
    _note(spec, ctx, "start")
    if "sleep" in spec:
        time.sleep(spec["sleep"])
    _note(spec, ctx, "end")
    return {"item": ctx.item, "pid": os.getpid()}


def map_policy(ctx: hy.PolicyContext) -> Any:
    """``hy.Map(input["node"], input["items"])`` at step 0, then finish with the
    items' results (a second map when ``input["again"]``: the same items)."""
    spec = ctx.input
    if ctx.step == 0 or (ctx.step == 1 and spec.get("again")):
        return hy.Map(spec["node"], spec["items"])
    return hy.Finish({"parallel_results": ctx.parallel_results})


class Collector(SupervisedActor):
    """Stands in for the agent: keeps every message it gets; ``("got",)`` answers
    them all, in arrival order."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if message == ("got",):
            self.send(sender, list(getattr(self, "got", [])))
        else:
            self.got: list[Any] = [*getattr(self, "got", []), message]
