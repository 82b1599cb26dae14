"""Bad input is a 422 whose answer names the field."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import UnprocessableEntityError

from tests.serve_api.support import STEPS

pytestmark = pytest.mark.timeout(60)


def refused(call: object) -> str:
    """The body of the 422 that ``call()`` raises."""
    with pytest.raises(UnprocessableEntityError) as caught:
        call()  # type: ignore[operator]
    return caught.value.response.text


def test_run_without_assistant_id(client: SyncLangGraphClient) -> None:
    """A run body without ``assistant_id`` is a 422 naming ``assistant_id``."""
    assert "assistant_id" in refused(lambda: client.http.post("/runs/wait", json={"input": {}}))


def test_run_with_a_bad_stream_mode(client: SyncLangGraphClient, thread_id: str) -> None:
    """An unknown ``stream_mode`` is a 422 naming ``stream_mode``; no run is made."""
    body = refused(lambda: client.runs.create(thread_id, STEPS, input={},
                                              stream_mode="bogus"))  # type: ignore[arg-type]
    assert "stream_mode" in body
    assert client.runs.list(thread_id) == []


def test_run_with_an_assistant_id_of_the_wrong_type(client: SyncLangGraphClient) -> None:
    """An ``assistant_id`` that is not a string is a 422 naming ``assistant_id``."""
    body = refused(lambda: client.http.post("/runs", json={"assistant_id": 5, "input": {}}))
    assert "assistant_id" in body


def test_thread_metadata_not_an_object(client: SyncLangGraphClient) -> None:
    """Thread ``metadata`` that is not an object is a 422 naming ``metadata``."""
    assert "metadata" in refused(lambda: client.http.post("/threads", json={"metadata": "x"}))


def test_store_value_not_an_object(client: SyncLangGraphClient) -> None:
    """A store item ``value`` that is not an object is a 422 naming ``value``."""
    body = refused(lambda: client.http.put(
        "/store/items", json={"namespace": ["conformance"], "key": "k", "value": 3}))
    assert "value" in body


def test_store_search_prefix_not_a_list(client: SyncLangGraphClient) -> None:
    """A ``namespace_prefix`` that is not a list is a 422 naming ``namespace_prefix``."""
    body = refused(lambda: client.http.post("/store/items/search",
                                            json={"namespace_prefix": "conformance"}))
    assert "namespace_prefix" in body


def test_assistants_search_limit_not_an_integer(client: SyncLangGraphClient) -> None:
    """An assistants search ``limit`` that is not an integer is a 422 naming ``limit``."""
    assert "limit" in refused(lambda: client.http.post("/assistants/search", json={"limit": "x"}))


def test_body_not_json(client: SyncLangGraphClient) -> None:
    """A body that is not JSON is a 422."""
    response = client.http.client.post("/threads", content=b"{not json",
                                       headers={"Content-Type": "application/json"})
    assert response.status_code == 422
