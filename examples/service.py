"""One agent serving many conversations at once: ``max_invocations``, threads,
an ``async def`` LLM-like node sharing a few edge processes, ``auto_recover``.

    python examples/service.py 200        # 200 conversations at once, then a second turn each

The graph: ``plan`` -> ``llm`` (an ``async def`` node that waits 200 ms, as a
model call would; ``edge_concurrency`` lets one edge process run 200 of them at
once) -> ``answer``. Each conversation is a thread: its second turn starts from
the state its first ended with (``turns`` counts them). ``llm`` is declared
idempotent (asking the model again is harmless), so after a crash
``auto_recover`` goes on with every conversation by itself.

From a shell:

    hayata system start
    hayata agent start examples.service:config
    hayata run service --thread user-1 --input '{"question": "hi"}'
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import time
from typing import Any

import hayata_py as hy

LLM_SECONDS = 0.2


def plan(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"plan": f"answer {ctx.input.get('question')!r}"}


async def llm(ctx: hy.NodeContext) -> dict[str, Any]:
    await asyncio.sleep(LLM_SECONDS)  # the model call
    return {"draft": f"draft for {ctx.input.get('question')!r}"}


def answer(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"answer": ctx.state.get("draft"), "turns": int(ctx.state.get("turns", 0)) + 1}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    steps = ("plan", "llm", "answer")
    if ctx.step < len(steps):
        return hy.Next(steps[ctx.step], ctx.input)
    return hy.Finish({"answer": ctx.state["answer"], "turns": ctx.state["turns"],
                      "thread": ctx.thread})


def config(max_invocations: int = 1000) -> hy.AgentConfig:
    return hy.AgentConfig(
        id="service",
        nodes={"plan": plan, "llm": llm, "answer": answer},
        decision_policy=policy,
        max_invocations=max_invocations,
        edge_concurrency={"llm": 200},
        node_concurrency={"llm": 8, "plan": 2, "answer": 2},
        idempotent_nodes=frozenset({"llm"}),
        auto_recover=True,
    )


def converse(agent: hy.AgentRef, count: int, turn: int) -> float:
    """``count`` conversations at once (one turn each); the seconds it took."""
    started = time.perf_counter()
    ids: list[str] = []
    lock = threading.Lock()

    def submit(first: int) -> None:
        for n in range(first, count, 4):
            inv = agent.run({"question": f"question {turn} of user {n}"}, thread=f"user-{n}")
            with lock:
                ids.append(inv)

    workers = [threading.Thread(target=submit, args=(k,)) for k in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results = [agent.wait(inv, timeout=300) for inv in ids]
    assert all(r.ok and r.result["turns"] == turn for r in results), results[:3]
    return time.perf_counter() - started


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as data, hy.AgentSystem(data) as system:
        agent = system.start_agent(config(max(count, 1)))
        for turn in (1, 2):
            seconds = converse(agent, count, turn)
            print(f"turn {turn}: {count} conversations in {seconds:.2f} s "
                  f"({count / seconds:.0f}/s), {len(system.processes())} processes")
        info = agent.thread("user-0")
        print(f"thread user-0: version {info.version}, state turns={info.state['turns']}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
