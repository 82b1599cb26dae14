"""Node functions and policies used by the agent tests (module level: importable)."""

from __future__ import annotations

from typing import Any

import hayata_py as hy


def mock_node(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"answer": f"echo:{ctx.input}", "seen_state": dict(ctx.state)}


def once_policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next("mock", ctx.input)
    return hy.Finish(ctx.last_result)
