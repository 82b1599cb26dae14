"""The store: namespaced items under ``/store``."""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import Iterator

import pytest
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from tests.serve_api.graphs import embed
from tests.serve_api.support import RECALL, run_async

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def root(client: SyncLangGraphClient) -> Iterator[str]:
    """A namespace label of this test's own; its items are deleted after."""
    label = f"conformance-{uuid.uuid4().hex}"
    yield label
    for item in client.store.search_items([label], limit=1000)["items"]:
        with contextlib.suppress(NotFoundError):
            client.store.delete_item(item["namespace"], item["key"])


def test_put_then_get(client: SyncLangGraphClient, root: str) -> None:
    """``PUT /store/items`` (204) then ``GET`` answers the item with its namespace, key, value."""
    client.store.put_item([root, "a"], "k", {"v": 1})
    item = client.store.get_item([root, "a"], "k")
    assert item is not None
    assert (item["namespace"], item["key"], item["value"]) == ([root, "a"], "k", {"v": 1})
    assert item["created_at"] and item["updated_at"]


def test_put_replaces_the_value(client: SyncLangGraphClient, root: str) -> None:
    """A second put of the same key replaces its value."""
    client.store.put_item([root], "k", {"v": 1})
    client.store.put_item([root], "k", {"v": 2})
    item = client.store.get_item([root], "k")
    assert item is not None and item["value"] == {"v": 2}


def test_get_missing_is_null(client: SyncLangGraphClient, root: str) -> None:
    """``GET /store/items`` of a missing key answers 200 with ``null``."""
    assert client.store.get_item([root], "absent") is None


def test_delete(client: SyncLangGraphClient, root: str) -> None:
    """``DELETE /store/items`` removes the item: a later get is ``null``."""
    client.store.put_item([root], "k", {"v": 1})
    client.store.delete_item([root], "k")
    assert client.store.get_item([root], "k") is None


def test_search_by_prefix(client: SyncLangGraphClient, root: str) -> None:
    """``POST /store/items/search`` finds the items under a namespace prefix, not beside it."""
    client.store.put_item([root, "a"], "k1", {"v": 1})
    client.store.put_item([root, "b"], "k2", {"v": 2})
    client.store.put_item([f"{root}-other"], "k3", {"v": 3})
    try:
        found = client.store.search_items([root])["items"]
        assert sorted((i["namespace"][1], i["key"]) for i in found) == [("a", "k1"), ("b", "k2")]
        only_a = client.store.search_items([root, "a"])["items"]
        assert [i["key"] for i in only_a] == ["k1"]
    finally:
        client.store.delete_item([f"{root}-other"], "k3")


def test_search_filter_limit_offset(client: SyncLangGraphClient, root: str) -> None:
    """``filter`` matches values; ``limit``/``offset`` page the results."""
    for n in range(4):
        client.store.put_item([root], f"k{n}", {"even": n % 2 == 0, "n": n})
    even = client.store.search_items([root], filter={"even": True})["items"]
    assert sorted(i["value"]["n"] for i in even) == [0, 2]
    page1 = client.store.search_items([root], limit=2, offset=0)["items"]
    page2 = client.store.search_items([root], limit=2, offset=2)["items"]
    assert len(page1) == len(page2) == 2
    assert {i["key"] for i in page1 + page2} == {"k0", "k1", "k2", "k3"}


def test_list_namespaces(client: SyncLangGraphClient, root: str) -> None:
    """``POST /store/namespaces`` lists namespaces by prefix, cut at ``max_depth``."""
    client.store.put_item([root, "a", "x"], "k", {})
    client.store.put_item([root, "b"], "k", {})
    full = client.store.list_namespaces(prefix=[root])["namespaces"]
    assert sorted(full) == [[root, "a", "x"], [root, "b"]]
    cut = client.store.list_namespaces(prefix=[root], max_depth=2)["namespaces"]
    assert sorted(cut) == [[root, "a"], [root, "b"]]


def test_namespace_label_with_a_period_is_422(client: SyncLangGraphClient, root: str) -> None:
    """A namespace label containing ``.`` is a 422 (labels travel joined by periods).

    Sent raw: the SDK refuses such a label itself, before any request."""
    with pytest.raises(UnprocessableEntityError):
        client.http.put("/store/items", json={"namespace": [root, "a.b"], "key": "k", "value": {}})


def test_async_store(server_url: str, root: str) -> None:
    """The async client puts, gets and deletes the same way."""

    async def body(client: LangGraphClient) -> tuple[object, object]:
        await client.store.put_item([root], "async", {"v": "a"})
        got = await client.store.get_item([root], "async")
        await client.store.delete_item([root], "async")
        return got, await client.store.get_item([root], "async")

    got, after = run_async(server_url, body)
    assert isinstance(got, dict) and got["value"] == {"v": "a"}
    assert after is None


# -- semantic search: langgraph.json's store.index embeds the items' "text" ----------

def _vector(text: str) -> list[float]:
    return asyncio.run(embed([text]))[0]


def _cosine(query: str, text: str) -> float:
    a, b = _vector(query), _vector(text)
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


TEXTS = {"cat": "the cat sat on the mat", "dog": "a dog ran in the park",
         "both": "the cat and the dog", "far": "quantum flux capacitor on"}
QUERY = "cat on a mat"


def _by_similarity(texts: dict[str, str], query: str) -> list[str]:
    scores = [_cosine(query, text) for text in texts.values()]
    assert len(set(scores)) == len(scores), "the test's texts must score apart"
    return sorted(texts, key=lambda key: -_cosine(query, texts[key]))


def test_search_by_query_ranks_by_similarity(client: SyncLangGraphClient, root: str) -> None:
    """With the config's ``store.index``, ``query`` ranks the items by the cosine
    similarity of their ``text`` field to it, each with its ``score``."""
    for key, text in TEXTS.items():
        client.store.put_item([root], key, {"text": text, "n": len(key)})
    found = client.store.search_items([root], query=QUERY, limit=10)["items"]
    assert [i["key"] for i in found] == _by_similarity(TEXTS, QUERY)
    for item in found:
        assert item["score"] == pytest.approx(_cosine(QUERY, TEXTS[item["key"]]))
    page = client.store.search_items([root], query=QUERY, limit=2, offset=1)["items"]
    assert [i["key"] for i in page] == _by_similarity(TEXTS, QUERY)[1:3]
    short = client.store.search_items([root], query=QUERY, filter={"n": 3})["items"]
    assert [i["key"] for i in short] == [k for k in _by_similarity(TEXTS, QUERY)
                                         if len(k) == 3]


def test_search_by_query_puts_unembedded_items_last(client: SyncLangGraphClient,
                                                     root: str) -> None:
    """An item put with ``index=False``, or without the indexed field, has no
    score and comes after the scored ones; ``index=[...]`` embeds its fields."""
    client.store.put_item([root], "scored", {"text": TEXTS["dog"]})
    client.store.put_item([root], "hidden", {"text": QUERY}, index=False)
    client.store.put_item([root], "untexted", {"other": QUERY})
    client.store.put_item([root], "titled", {"title": QUERY, "text": "far away"},
                          index=["title"])
    found = client.store.search_items([root], query=QUERY, limit=10)["items"]
    assert [i["key"] for i in found[:2]] == ["titled", "scored"]
    assert found[0]["score"] == pytest.approx(1.0)
    assert found[1]["score"] == pytest.approx(_cosine(QUERY, TEXTS["dog"]))
    assert sorted(i["key"] for i in found[2:]) == ["hidden", "untexted"]
    assert [i["score"] for i in found[2:]] == [None, None]


def test_a_node_searches_the_store_by_query(client: SyncLangGraphClient, root: str,
                                           thread_id: str) -> None:
    """A node's ``get_store().search(query=...)`` ranks as the API's search does."""
    for key, text in TEXTS.items():
        client.store.put_item([root, "notes"], key, {"text": text})
    out = client.runs.wait(thread_id, RECALL,
                           input={"namespace": [root, "notes"], "query": QUERY})
    assert isinstance(out, dict)
    assert [key for key, _ in out["found"]] == _by_similarity(TEXTS, QUERY)[:3]
    for key, score in out["found"]:
        assert score == pytest.approx(_cosine(QUERY, TEXTS[key]))
