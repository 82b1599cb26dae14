"""The served store's semantic-search index, from ``langgraph.json``'s
``store.index``: resolved as LangGraph's server resolves it, refused with the
key named when it cannot be, and absent: a ``query`` is ignored (score null)
as LangGraph's server ignores it. Ranking itself is checked against
``langgraph dev`` in tests/serve_api/test_store.py."""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

from hayata_py._errors import ConfigError
from hayata_py.langgraph import HayataStore
from hayata_py.serve._graphs import read_config
from hayata_py.serve._items import Items, config_store_index
from hayata_py.serve._wire import BadRequest, StorePut, parse
from hayata_py.store import open_store

pytestmark = pytest.mark.timeout(60)

EMBED_MODULE = '''
def embed(texts):
    return [[float(len(t)), 1.0] for t in texts]

not_callable = 3
'''


def _config(folder: Path, store: Any, module: str = "my_embed") -> Path:
    (folder / "graph.py").write_text("graph = None\n")
    (folder / f"{module}.py").write_text(EMBED_MODULE)
    file = folder / "langgraph.json"
    file.write_text(json.dumps({"graphs": {"g": "./graph.py:graph"}, "store": store}))
    return file


def test_a_file_embed_resolves_and_pickles_by_its_module(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``"./my_embed.py:embed"`` is the function of that file, imported as a
    module of the config's folder, so a HayataStore with it pickles for the
    node processes (PYTHONPATH names the folder)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    module = f"embed_{tmp_path.name}".replace("-", "_")
    file = _config(tmp_path, {"index": {"embed": f"./{module}.py:embed", "dims": 2,
                                        "fields": ["text"], "ttl": None}}, module)
    index = config_store_index(file)
    assert index is not None
    assert index["dims"] == 2 and index.get("fields") == ["text"]
    assert index["embed"].__module__ == module and index["embed"](["abc"]) == [[3.0, 1.0]]
    assert sys.path[0] == str(tmp_path) and str(tmp_path) in os.environ["PYTHONPATH"]
    store = HayataStore(f"sqlite:///{tmp_path / 'd.db'}", index=index)
    again = pickle.loads(pickle.dumps(store))
    assert again.index is not None and again.index["embed"] is index["embed"]


def test_no_store_or_no_index_is_no_index(tmp_path: Path) -> None:
    assert config_store_index(_config(tmp_path, None)) is None
    assert config_store_index(_config(tmp_path, {"ttl": {"default_ttl": 5}})) is None


@pytest.mark.parametrize(("store", "field", "says"), [
    ("nope", "store", "object"),
    ({"index": [1]}, "store.index", "object"),
    ({"index": {"dims": 2}}, "store.index.embed", "./file.py:name"),
    ({"index": {"embed": "./my_embed.py:embed"}}, "store.index.dims", ">= 1"),
    ({"index": {"embed": "./my_embed.py:embed", "dims": 0}}, "store.index.dims", ">= 1"),
    ({"index": {"embed": "./my_embed.py:embed", "dims": True}}, "store.index.dims", ">= 1"),
    ({"index": {"embed": "./my_embed.py:embed", "dims": 2, "fields": "text"}},
     "store.index.fields", "list of field paths"),
    ({"index": {"embed": "./absent.py:embed", "dims": 2}}, "store.index.embed",
     "does not exist"),
    ({"index": {"embed": "./my_embed.py:absent", "dims": 2}}, "store.index.embed",
     "does not import"),
    ({"index": {"embed": "./my_embed.py:not_callable", "dims": 2}}, "store.index.embed",
     "gives no embeddings"),
    ({"index": {"embed": "nosuchprovider:some-model", "dims": 2}}, "store.index.embed",
     "gives no embeddings"),
])
def test_a_bad_index_is_refused_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              store: Any, field: str, says: str) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    sys.modules.pop("my_embed", None)
    with pytest.raises(ConfigError, match=says) as refused:
        config_store_index(_config(tmp_path, store))
    assert refused.value.details["field"] == field


def test_only_the_stores_other_keys_are_noted_as_ignored(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    file = _config(tmp_path, {"index": {"embed": "./my_embed.py:embed", "dims": 2},
                              "ttl": {"default_ttl": 5}})
    _, notes = read_config(file)
    assert [n for n in notes if "store" in n] == ["'store.ttl' in langgraph.json is ignored "
                                                  "by hayata serve"]


def test_without_an_index_a_query_is_ignored(tmp_path: Path) -> None:
    """As LangGraph's server: items newest first, each with score null."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    open_store(url).close()
    items = Items(HayataStore(url))
    items.put(["n"], "old", {"text": "cat"})
    items.put(["n"], "new", {"text": "dog"})
    assert not items.semantic
    found = items.search(["n"], None, 10, 0, query="cat")
    assert [(i["key"], i["score"]) for i in found] == [("new", None), ("old", None)]


@pytest.mark.parametrize("index", [True, "text", [""], [1], {"fields": []}])
def test_a_puts_bad_index_is_a_422_naming_index(index: Any) -> None:
    body = json.dumps({"namespace": ["n"], "key": "k", "value": {}, "index": index})
    with pytest.raises(BadRequest) as refused:
        parse(StorePut, body.encode())
    assert refused.value.status == 422 and "index" in refused.value.detail


@pytest.mark.parametrize("index", [None, False, ["text", "meta.title"]])
def test_a_puts_index_is_taken(index: Any) -> None:
    body = json.dumps({"namespace": ["n"], "key": "k", "value": {}, "index": index})
    assert parse(StorePut, body.encode()).index == index
