"""The soak's graph: one node, one step."""

from __future__ import annotations

from typing import Any

import hayata_py as hy


def echo(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"n": ctx.input["n"]}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    return hy.Next("a", ctx.input) if ctx.step == 0 else hy.Finish(dict(ctx.state))
