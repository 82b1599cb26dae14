"""LangGraph's store on hayata: nodes reaching it by ``get_store()``,
``runtime.store`` and a ``store`` parameter see the same items as with
LangGraph's own ``InMemoryStore``; :class:`HayataStore` is the table
``hayata serve``'s ``/store/items`` serves, so a node's put is an HTTP item."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

import hayata_py as hy
from hayata_py import langgraph as hylg
from hayata_py.langgraph._store import load_store, store_spec
from hayata_py.serve._db import ServeDB
from hayata_py.serve._items import Items
from tests.lgcompat import graphs

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[hy.AgentSystem]:
    with hy.AgentSystem(tmp_path_factory.mktemp("lgstore") / "data") as agents:
        yield agents


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def test_nodes_see_the_same_items_as_with_langgraphs_in_memory_store(
        system: hy.AgentSystem) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"
    theirs_store, ours_store = InMemoryStore(), hylg.HayataStore(system)
    for store in (theirs_store, ours_store):  # an item put from outside the graph
        store.put(("memo", user), "seed", {"from": "outside"})
    reference = graphs.memo.compile(checkpointer=InMemorySaver(), store=theirs_store)
    app = hylg.compile(graphs.memo, system, id="memo", store=ours_store)
    ours = app.invoke({"user": user, "log": []}, _config())
    # LangGraph runs a graph with an async def node from an event loop only
    assert ours == asyncio.run(reference.ainvoke({"user": user, "log": []}, _config()))
    assert ours["log"][0] == ["seed", {"from": "outside"}]
    assert ["after delete", ["k2", "k3"], None] in ours["log"]
    # what the nodes put is in the store after the run, for the caller and serve alike
    item = ours_store.get(("memo", user, "notes"), "k2")
    assert item is not None and item.value == {"n": 20, "text": "note 2 again"}
    assert item.updated_at >= item.created_at
    db = ServeDB(system.store_url)
    try:
        api = Items(hylg.HayataStore.over(db.holder))
        served = api.get(["memo", user, "notes"], "k3")
        assert served is not None and served["value"] == {"n": 3, "text": "note 3"}
        keys = [i["key"] for i in api.search(["memo", user], None, 10, 0)]
        assert keys == [i.key for i in ours_store.search(("memo", user))]
        assert sorted(keys) == ["async", "k2", "k3", "seed"]
    finally:
        db.close()


def test_an_item_put_through_serve_is_read_by_a_node(system: hy.AgentSystem) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"
    db = ServeDB(system.store_url)
    try:
        Items(hylg.HayataStore.over(db.holder)).put(["memo", user], "seed", {"from": "http"})
    finally:
        db.close()
    app = hylg.compile(graphs.memo, system, id="memo", store=hylg.HayataStore(system))
    assert app.invoke({"user": user, "log": []}, _config())["log"][0] == \
        ["seed", {"from": "http"}]


def test_search_order_filters_and_refusals(tmp_path: Path, system: hy.AgentSystem) -> None:
    store = hylg.HayataStore(system.store_url)
    space = ("order", uuid.uuid4().hex[:6])
    for key, n in (("a", 1), ("b", 2), ("c", 3)):
        store.put(space, key, {"n": n, "tag": {"x": n % 2}})
    store.put(space, "a", {"n": 10, "tag": {"x": 0}})
    # newest updated first, as LangGraph's PostgresStore
    assert [i.key for i in store.search(space)] == ["a", "c", "b"]
    assert [i.key for i in store.search(space, filter={"n": {"$lt": 3}})] == ["b"]
    assert [i.key for i in store.search(space, filter={"tag": {"x": 1}})] == ["c"]
    assert [i.key for i in store.search(space, filter={"n": {"$ne": 10}}, limit=1,
                                        offset=1)] == ["b"]
    with pytest.raises(hy.ConfigError, match="query") as refused:
        store.search(space, query="numbers")
    assert refused.value.details["field"] == "query"
    # from a node: the caller gets it as the node's exception
    app = hylg.compile(graphs.seeker, system, store=store)
    with pytest.raises(hy.ConfigError, match="embedding index") as raised:
        app.invoke({"user": "u", "log": []}, _config())
    assert raised.value.details["field"] == "query"
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})
    with pytest.raises(NotImplementedError):
        store.put(space, "k", {"v": 1}, ttl=5)


TEXTS = {"a": "cat cat dog", "b": "fish fish", "c": "dog dog dog bird", "d": "cat",
         "e": None, "f": "bird fish fish cat"}
"""Texts whose stand-in vectors tie for none of the queries below (a tie may
rank either way)."""


def _fill(store: Any, space: tuple[str, ...]) -> None:
    for key, text in TEXTS.items():
        value: dict[str, Any] = {"n": len(key) + ord(key)}
        if text is not None:
            value["text"] = text
        store.put(space, key, value)


def _ranked(found: list[Any]) -> list[tuple[str, float | None]]:
    return [(i.key, None if i.score is None else round(i.score, 9)) for i in found]


def test_semantic_search_with_an_index_ranks_as_in_memory_store(
        system: hy.AgentSystem) -> None:
    space = ("sem", uuid.uuid4().hex[:6])
    theirs = InMemoryStore(index=graphs.INDEX)
    ours = hylg.HayataStore(system, index=graphs.INDEX)
    _fill(theirs, space)
    _fill(ours, space)
    for query, options in (("cat", {}), ("dog and bird", {"limit": 3}),
                           ("fish", {"offset": 2, "limit": 2}),
                           ("cat", {"filter": {"n": {"$gt": 100}}}),
                           ("nothing", {"limit": 10})):
        mine = _ranked(ours.search(space, query=query, **options))
        assert mine == _ranked(theirs.search(space, query=query, **options)), query
    best = ours.search(space, query="cat", limit=2)
    assert [i.key for i in best] == ["d", "a"] and best[0].score == pytest.approx(1.0)
    # each text is embedded once per process: again, only the query is
    before = len(graphs.EMBEDDED)
    assert _ranked(ours.search(space, query="cat", limit=2)) == _ranked(best)
    assert graphs.EMBEDDED[before:] == ["cat"]
    # an item's own index=: other fields, or none (after the scored, score None)
    for store in (theirs, ours):
        store.put(space, "g", {"title": "cat cat", "text": "fish"}, index=["title"])
        store.put(space, "h", {"text": "cat"}, index=False)
    for query, options in (("cat", {"limit": 10}), ("fish", {"limit": 3})):
        mine = _ranked(ours.search(space, query=query, **options))
        expected = _ranked(theirs.search(space, query=query, **options))
        # unscored items come in each store's listing order (here newest first,
        # InMemoryStore's by insertion)
        assert [r for r in mine if r[1] is not None] == \
            [r for r in expected if r[1] is not None], query
        assert sorted(r[0] for r in mine if r[1] is None) == \
            sorted(r[0] for r in expected if r[1] is None), query
    assert sorted(k for k, score in _ranked(ours.search(space, query="cat", limit=10))
                  if score is None) == ["e", "h"]
    with pytest.raises(hy.ConfigError, match="index") as refused:
        ours.put(space, "g", {"text": "cat"}, index=True)  # type: ignore[arg-type]
    assert refused.value.details["field"] == "index"
    with pytest.raises(hy.ConfigError, match="embed"):
        hylg.HayataStore(system, index={"dims": 3})
    # from a node: the index (its embedding function) goes to the node's process
    user = f"u{uuid.uuid4().hex[:6]}"
    _fill(theirs, ("memo", user))
    _fill(ours, ("memo", user))
    reference = graphs.seeker.compile(checkpointer=InMemorySaver(), store=theirs)
    app = hylg.compile(graphs.seeker, system, id="seeker-index", store=ours)
    given = {"user": user, "log": []}
    assert app.invoke(given, _config()) == reference.invoke(given, _config())


def test_an_async_embedding_function_ranks_as_in_memory_store(
        system: hy.AgentSystem) -> None:
    """An ``async def`` embed (LangGraph's wrapper of it has no sync methods)
    ranks the same from sync and async code, as InMemoryStore's async search."""
    space = ("sem-async", uuid.uuid4().hex[:6])
    theirs = InMemoryStore(index=graphs.ASYNC_INDEX)
    ours = hylg.HayataStore(system, index=graphs.ASYNC_INDEX)

    async def fill_theirs() -> None:  # its sync put cannot call an async embed
        for key, text in TEXTS.items():
            await theirs.aput(space, key, {"n": len(key) + ord(key)}
                              | ({"text": text} if text is not None else {}))
    asyncio.run(fill_theirs())
    _fill(ours, space)
    expected = _ranked(asyncio.run(theirs.asearch(space, query="dog and bird", limit=4)))
    assert _ranked(ours.search(space, query="dog and bird", limit=4)) == expected
    assert _ranked(asyncio.run(ours.asearch(space, query="dog and bird", limit=4))) == expected


def test_stores_the_node_processes_cannot_share_are_refused(system: hy.AgentSystem) -> None:
    with pytest.raises(hy.ConfigError, match="HayataStore") as refused:
        hylg.compile(graphs.memo, system, id="memo-mem", store=InMemoryStore())
    assert refused.value.details["field"] == "store"
    with pytest.raises(hy.ConfigError, match="BaseStore"):
        hylg.compile(graphs.memo, system, id="memo-obj", store=object())
    with pytest.raises(hy.ConfigError, match="does not import"):
        hylg.compile(graphs.memo, system, id="memo-path", store="tests.lgcompat.graphs:nope")
    with pytest.raises(hy.ConfigError, match="HayataStore"):
        hylg.compile(graphs.memo, system, id="memo-path",
                     store="tests.lgcompat.graphs:shared_in_memory")
    with pytest.raises(hy.ConfigError, match=r"compiled graph's store is refused.*"
                       r"HayataStore"):
        hylg.compile(graphs.compiled_with_store, system, id="memo-compiled")
    assert not {"memo-mem", "memo-obj", "memo-path", "memo-compiled"} & set(system.agents())
    # a compiled graph's store is replaced by the one given
    app = hylg.compile(graphs.compiled_with_store, system, id="memo-compiled",
                       store=hylg.HayataStore(system))
    assert isinstance(load_store(app.store), hylg.HayataStore)


def test_a_store_by_path_is_built_once_per_process(system: hy.AgentSystem,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graphs, "STORE_URL", system.store_url, raising=False)
    spec = store_spec("tests.lgcompat.graphs:hayata_store")
    store = load_store(spec)
    assert isinstance(store, hylg.HayataStore) and store.url == system.store_url
    assert load_store(spec) is store
    # a HayataStore pickles as its URL: each process connects on its own
    assert isinstance(load_store(store_spec(hylg.HayataStore(system))), hylg.HayataStore)
