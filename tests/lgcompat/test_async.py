"""``async def`` nodes, and the asyncio methods on an ``AsyncAgentSystem``."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import hayata_py as hy
from hayata_py import langgraph as hylg
from tests.lgcompat import graphs

pytestmark = pytest.mark.timeout(120)


def test_async_nodes_and_methods(tmp_path: Path) -> None:
    reference = graphs.asyncgraph.compile(checkpointer=InMemorySaver())
    input: Any = {"text": "hi", "steps": []}

    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            app = await hylg.acompile(graphs.asyncgraph, system)
            ours = [chunk async for chunk in app.astream(
                input, {"configurable": {"thread_id": "a"}}, stream_mode=["updates", "custom"])]
            theirs = [chunk async for chunk in reference.astream(
                input, {"configurable": {"thread_id": "a"}}, stream_mode=["updates", "custom"])]
            assert ours == theirs
            assert ("custom", {"async": "hi"}) in ours
            config: Any = {"configurable": {"thread_id": "b"}}
            assert await app.ainvoke(input, config) == await reference.ainvoke(input, config)
            assert (await app.aget_state(config)).values == \
                (await reference.aget_state(config)).values
            with pytest.raises(hy.ConfigError, match="thread_id"):
                await app.ainvoke(input, {"configurable": {}})

    asyncio.run(main())


def test_async_node_messages_mode(tmp_path: Path) -> None:
    reference = graphs.atalker.compile(checkpointer=InMemorySaver())
    input: Any = {"messages": [("user", "hi")]}

    def tokens(chunks: list[Any]) -> list[tuple[str, str]]:
        return [(chunk.content, meta["langgraph_node"]) for chunk, meta in chunks]

    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            app = await hylg.acompile(graphs.atalker, system)
            ours = [c async for c in app.astream(input, {"configurable": {"thread_id": "m"}},
                                                  stream_mode="messages")]
            theirs = [c async for c in reference.astream(
                input, {"configurable": {"thread_id": "m"}}, stream_mode="messages")]
            assert tokens(ours) == tokens(theirs)
            assert "".join(content for content, _ in tokens(ours)) == "async tokens here"

    asyncio.run(main())


def test_ainvoke_holds_no_thread_while_the_run_goes_on(tmp_path: Path) -> None:
    """On an AsyncAgentSystem, ``ainvoke`` of a new run awaits hayata's async
    invoke: with asyncio's default thread pool taken, runs at once still end
    (through a thread each, they would wait for it forever)."""
    reference = graphs.asyncgraph.compile(checkpointer=InMemorySaver())

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            app = await hylg.acompile(graphs.asyncgraph, system, max_invocations=8,
                                      edge_concurrency={"echo": 8})
            taken = threading.Event()
            held = loop.run_in_executor(None, taken.wait)
            try:
                ours = await asyncio.wait_for(asyncio.gather(*(
                    app.ainvoke({"text": f"t{i}", "steps": []},
                                {"configurable": {"thread_id": f"many-{i}"}})
                    for i in range(4))), timeout=60)
            finally:
                taken.set()
                await held
            theirs = [await reference.ainvoke({"text": f"t{i}", "steps": []},
                                              {"configurable": {"thread_id": f"many-{i}"}})
                      for i in range(4)]
            assert ours == theirs
            # a thread with a run: invoke(None) goes on through the same path
            assert await app.ainvoke(None, {"configurable": {"thread_id": "many-0"}}) \
                == theirs[0]

    asyncio.run(main())
