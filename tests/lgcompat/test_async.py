"""``async def`` nodes, and the asyncio methods on an ``AsyncAgentSystem``."""

from __future__ import annotations

import asyncio
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
