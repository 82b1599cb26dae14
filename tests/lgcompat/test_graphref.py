"""How ``hylg.compile`` finds the import path of a graph given as an object:
the likely modules first (the caller's, the state schema's, the nodes'), every
loaded module only when none of those binds it."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

from hayata_py.langgraph._graphref import graph_path
from tests.lgcompat import graphs


class _Watched(types.ModuleType):
    """A loaded module that records each look into its namespace."""

    def __init__(self, name: str, looks: list[str]) -> None:
        super().__init__(name)
        self._looks = looks

    def __getattribute__(self, attr: str) -> Any:
        if attr == "__dict__":
            object.__getattribute__(self, "_looks").append(attr)
        return super().__getattribute__(attr)


@pytest.fixture
def watched() -> Iterator[list[str]]:
    looks: list[str] = []
    sys.modules["hylg_watched_module"] = _Watched("hylg_watched_module", looks)
    # First in the modules' order: a scan of every module would read it first.
    for name in [name for name in sys.modules if name != "hylg_watched_module"]:
        sys.modules[name] = sys.modules.pop(name)
    try:
        yield looks
    finally:
        del sys.modules["hylg_watched_module"]


@pytest.mark.timeout(30)
def test_a_builder_bound_where_its_schema_is_is_found_without_the_other_modules(
        watched: list[str]) -> None:
    assert graph_path(graphs.sequence) == "tests.lgcompat.graphs:sequence"
    assert watched == []


@pytest.mark.timeout(30)
def test_a_builder_bound_elsewhere_is_found_among_all_loaded_modules(
        watched: list[str]) -> None:
    built = StateGraph(graphs.SeqState)
    built.add_node("a", graphs.seq_a)
    built.add_edge(START, "a")
    built.add_edge("a", END)
    holder = types.ModuleType("hylg_holder_module")
    holder.built = built  # type: ignore[attr-defined]
    sys.modules["hylg_holder_module"] = holder
    try:
        assert graph_path(built) == "hylg_holder_module:built"
    finally:
        del sys.modules["hylg_holder_module"]
    assert watched == ["__dict__"]
