"""Assistants: one per graph, its id a uuid5 of the graph id."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from tests.serve_api.conftest import forget_thread
from tests.serve_api.support import ASK, CHAT, STEPS, assistant_id_of

pytestmark = pytest.mark.timeout(60)

UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"


def test_search_lists_one_assistant_per_graph(client: SyncLangGraphClient) -> None:
    """``POST /assistants/search`` lists each graph's assistant: id uuid5(graph), name graph."""
    found = {a["graph_id"]: a for a in client.assistants.search(limit=100)}
    for graph in (STEPS, ASK, CHAT):
        assert found[graph]["assistant_id"] == assistant_id_of(graph)
        assert found[graph]["name"] == graph
        assert found[graph]["metadata"].get("created_by") == "system"


def test_search_filters_by_graph_id(client: SyncLangGraphClient) -> None:
    """``graph_id`` in the search body keeps only that graph's assistants."""
    found = client.assistants.search(graph_id=ASK)
    assert [a["assistant_id"] for a in found] == [assistant_id_of(ASK)]


def test_get_by_uuid(client: SyncLangGraphClient) -> None:
    """``GET /assistants/{uuid}`` answers the assistant with its graph id."""
    assistant = client.assistants.get(assistant_id_of(STEPS))
    assert assistant["graph_id"] == STEPS
    assert assistant["assistant_id"] == assistant_id_of(STEPS)


def test_get_by_graph_name_is_422(client: SyncLangGraphClient) -> None:
    """``GET /assistants/{graph id}`` is a 422 (must be a UUID): only runs take the graph id."""
    with pytest.raises(UnprocessableEntityError):
        client.assistants.get(STEPS)


def test_get_unknown_uuid_is_404(client: SyncLangGraphClient) -> None:
    """``GET /assistants/{unknown uuid}`` is a 404."""
    with pytest.raises(NotFoundError):
        client.assistants.get(UNKNOWN_UUID)


def test_run_accepts_the_graph_id_as_assistant_id(client: SyncLangGraphClient) -> None:
    """A run given ``assistant_id="steps"`` runs that graph's assistant (its uuid in the run)."""
    run = client.runs.create(None, STEPS, input={"label": "g"})
    assert run["assistant_id"] == assistant_id_of(STEPS)
    client.runs.join(run["thread_id"], run["run_id"])
    forget_thread(client, run["thread_id"])


def test_run_with_unknown_graph_name_is_422(client: SyncLangGraphClient) -> None:
    """A run whose ``assistant_id`` is neither a uuid nor a graph id is a 422."""
    with pytest.raises(UnprocessableEntityError):
        client.runs.create(None, "no-such-graph", input={})


def test_run_with_unknown_assistant_uuid_is_404(client: SyncLangGraphClient) -> None:
    """A run whose ``assistant_id`` is an unknown uuid is a 404."""
    with pytest.raises(NotFoundError):
        client.runs.create(None, UNKNOWN_UUID, input={})


def test_graph_lists_nodes_and_edges(client: SyncLangGraphClient) -> None:
    """``GET /assistants/{id}/graph`` gives the nodes (with __start__/__end__) and edges."""
    graph = client.assistants.get_graph(assistant_id_of(STEPS))
    assert [n["id"] for n in graph["nodes"]] == ["__start__", "first", "middle", "last", "__end__"]
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert edges == {("__start__", "first"), ("first", "middle"), ("middle", "last"),
                     ("last", "__end__")}


def test_schemas_give_the_state_schema(client: SyncLangGraphClient) -> None:
    """``GET /assistants/{id}/schemas`` names the graph and its state's JSON schema."""
    schemas = client.assistants.get_schemas(assistant_id_of(STEPS))
    assert schemas["graph_id"] == STEPS
    assert {"label", "delay", "steps"} <= set(schemas["state_schema"]["properties"])
    assert schemas["state_schema"]["properties"]["steps"]["type"] == "array"
