"""Hello, hayata_py: one mock node, a policy that runs it once, streamed events,
then the same agent invoked (run and wait in one call).

Run it with ``make demo`` (or ``python examples/hello.py`` from the repo root).
Node functions and the policy are named by import path ("examples.hello:...")
because they run in other processes: the agent's and the edge's.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make "examples.hello" importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hayata_py as hy


def mock_node(ctx: hy.NodeContext) -> dict[str, Any]:
    """A node: returns a dict that is merged into the agent state."""
    return {"answer": f"mock answer to {ctx.input!r}"}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    """Run the mock node once, then finish with its result."""
    if ctx.step == 0:
        return hy.Next("mock", ctx.input)
    return hy.Finish(ctx.last_result)


def config() -> hy.AgentConfig:
    return hy.AgentConfig(
        id="hello",
        nodes={"mock": "examples.hello:mock_node"},
        decision_policy="examples.hello:policy",
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as data_dir, hy.AgentSystem(data_dir) as system:
        agent = system.start_agent(config())
        invocation = agent.run("hello", subscriber=hy.CALLER, stream=True)
        for message in agent.messages(invocation, timeout=30):
            if isinstance(message, hy.AgentEvent):
                print(f"event {message.sequence}: {message.type} {message.data}")
            else:
                print(f"result: ok={message.ok} result={message.result} error={message.error}")
                if not message.ok:
                    return 1
                break
        again = agent.invoke("again", timeout=30)  # run and wait in one message
        print(f"invoke: ok={again.ok} result={again.result}")
        return 0 if again.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
