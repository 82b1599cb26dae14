"""Two systems in one convention on this machine: a node placed on a "GPU host".

What it shows, step by step (all on loopback, one shared SQLite file; across
real hosts use PostgreSQL, see docs/deployment.md):

1. system ``a`` (the leader) runs the agent; system ``gpu-1`` joins with
   ``capabilities={"gpu": True}``; the ``embed`` node is placed there;
2. an invocation runs and streams its events back to this process;
3. ``gpu-1`` is SIGKILLed while ``embed`` works: ``a`` notices within about a
   second and reports the invocation *interrupted*, not failed;
4. ``gpu-2`` joins, the node is restarted there, and ``recover()`` finishes
   the invocation (``embed`` is idempotent, so it simply runs again).

Run: ``python examples/cluster.py`` from the repository root.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make "examples.cluster" importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hayata_py as hy

LIVENESS = hy.Liveness(heartbeat=0.2, heartbeat_misses=3, convention_period=2.0)


def tokenize(ctx: hy.NodeContext) -> dict[str, Any]:
    return {"tokens": ctx.input["text"].split()}


def embed(ctx: hy.NodeContext) -> dict[str, Any]:
    hold = ctx.input.get("hold")
    while hold and Path(hold).exists():  # stands for a long GPU computation
        time.sleep(0.01)
    return {"vectors": [[float(len(t))] for t in ctx.state["tokens"]]}


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish:
    if ctx.step == 0:
        return hy.Next("tokenize", ctx.input)
    if ctx.step == 1:
        return hy.Next("embed", ctx.input)
    return hy.Finish({"vectors": ctx.state["vectors"]})


def config() -> hy.AgentConfig:
    return hy.AgentConfig(
        id="embedder",
        nodes={"tokenize": "examples.cluster:tokenize", "embed": "examples.cluster:embed"},
        decision_policy="examples.cluster:policy",
        node_placement={"embed": {"gpu": True}},
        idempotent_nodes=frozenset({"embed"}),
        execution_timeout=60.0,
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.02)


def where(system: hy.AgentSystem, node: str) -> str:
    def walk(row: dict[str, Any]) -> Any:
        if row["id"] == f"node:{node}":
            return row
        for child in row.get("children", []):
            found = walk(child)
            if found:
                return found
        return None

    row = walk(system.tree())
    if row is None or row["pid"] is None:
        return f"{row['status'] if row else 'unknown'}"
    return f"pid {row['pid']} ({'another system' if row['remote'] else 'this system'})"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/shared.db"
        systems: list[hy.AgentSystem] = []

        def start(name: str, **kwargs: Any) -> hy.AgentSystem:
            system = hy.AgentSystem(Path(tmp) / name, store_url=store, name=name,
                                    liveness=LIVENESS, **kwargs)
            systems.append(system)
            return system

        try:
            a = start("a")
            leader = ("127.0.0.1", a.admin_port)
            gpu1 = start("gpu-1", convention_leader=leader, capabilities={"gpu": True})
            agent = a.start_agent(config())
            print(f"node embed runs on gpu-1: {where(a, 'embed')}")
            inv = agent.run({"text": "hello actor world"}, subscriber=hy.CALLER, stream=True)
            for message in agent.messages(inv, timeout=30):
                if isinstance(message, hy.AgentEvent):
                    print(f"  event {message.sequence}: {message.type}")
                else:
                    print(f"  result: {message.result}")

            hold = Path(tmp) / "hold"
            hold.touch()  # embed keeps working while this file exists
            inv = agent.run({"text": "crash test", "hold": str(hold)})
            wait_for(lambda: any(t.node_id == "embed" and t.status == "started"
                                 for t in a.store.get_tasks(inv)), "embed started")
            killed = time.monotonic()
            gpu1.kill()
            print("gpu-1 SIGKILLed while embed works")
            try:
                result = agent.wait(inv, timeout=30)
                code = result.error.code if result.error else "ok"
            except hy.HayataError as exc:
                code = exc.code
            print(f"  a noticed after {time.monotonic() - killed:.2f} s: {code}; "
                  f"agent status {agent.status()}")
            start("gpu-2", convention_leader=leader, capabilities={"gpu": True})
            wait_for(lambda: "another system" in where(a, "embed"), "embed on gpu-2")
            print(f"gpu-2 joined; node embed restarted there: {where(a, 'embed')}")
            hold.unlink()  # the re-run on gpu-2 finishes at once
            agent.recover()
            final = agent.wait(inv, timeout=60)
            print(f"recovered: ok={final.ok} result={final.result}")
            return 0 if final.ok else 1
        finally:
            for system in systems:
                system.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
