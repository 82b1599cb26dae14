"""``custom`` chunks (``get_stream_writer``) of a node run by
``hayata_py.langgraph`` reach ``HayataGraph.stream``'s caller as the node writes
them, not in one burst when it returns (``tests/lgcompat/gated.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py import langgraph as hylg
from tests.lgcompat import gated

pytestmark = pytest.mark.timeout(90)


def test_each_custom_chunk_reaches_the_caller_while_the_node_runs(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    app = hylg.compile(gated.gated, agents)
    seen: list[int] = []
    updates: list[Any] = []
    for mode, chunk in app.stream({"dir": str(tmp_path), "n": 3},
                                  {"configurable": {"thread_id": "gated"}},
                                  stream_mode=["custom", "updates"]):
        if mode == "custom":
            seen.append(chunk["i"])
            (tmp_path / f"seen-{chunk['i']}").touch()
        else:
            updates.append(chunk)
    assert seen == [1, 2, 3], (seen, updates)
    assert updates == [{"writer": {"gates": 3}}], "the node waited for a chunk the caller " \
        "had not been given"
