"""The Agent Server API conformance suite: one small test per behaviour of
LangGraph's server, driven by the real ``langgraph-sdk`` client against any
server that serves ``tests/serve_api/langgraph.json``.

Run it with ``pytest tests/serve_api --server-url http://127.0.0.1:PORT`` (or
``SERVE_API_URL`` in the environment); ``make test-serve-reference`` runs it
against LangGraph's own ``langgraph dev``. Without a URL, ``make test`` does not
collect this folder (tests/conftest.py), and naming the folder without one is a
usage error, never a silent skip.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError
from langgraph_sdk.schema import Thread

from tests.serve_api.support import HTTP_TIMEOUT, TERMINAL, wait_until

#: The environment variable that names the server when the option does not.
URL_ENV = "SERVE_API_URL"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--server-url",
        dest="server_url",
        default=None,
        help="base URL of the Agent Server API server the serve_api suite drives "
        f"(else ${URL_ENV}); it must serve tests/serve_api/langgraph.json",
    )


def configured_url(config: pytest.Config) -> str | None:
    """The server this run is given, by option or environment, if any."""
    url = config.getoption("server_url", default=None) or os.environ.get(URL_ENV)
    return str(url) if url else None


def pytest_configure(config: pytest.Config) -> None:
    if configured_url(config) is None:
        raise pytest.UsageError(
            "tests/serve_api drives a running server: give --server-url URL "
            f"(or {URL_ENV}), or run `make test-serve-reference`"
        )


@pytest.fixture(scope="session")
def server_url(pytestconfig: pytest.Config) -> str:
    """The server's base URL, once it answers ``GET /ok``."""
    url = configured_url(pytestconfig)
    assert url is not None

    def answers() -> bool:
        try:
            return httpx.get(f"{url}/ok", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(answers, f"{url}/ok answering 200", timeout=60.0)
    return url


@pytest.fixture(scope="session")
def client(server_url: str) -> Iterator[SyncLangGraphClient]:
    """The sync SDK client of the server."""
    with get_sync_client(url=server_url, timeout=HTTP_TIMEOUT) as sync_client:
        yield sync_client


@pytest.fixture
def new_thread(client: SyncLangGraphClient) -> Iterator[Callable[..., Thread]]:
    """Create threads (``client.threads.create`` arguments); at teardown their
    unfinished runs are cancelled and the threads deleted."""
    made: list[str] = []

    def create(**kwargs: Any) -> Thread:
        thread = client.threads.create(**kwargs)
        made.append(thread["thread_id"])
        return thread

    yield create
    for thread_id in made:
        forget_thread(client, thread_id)


@pytest.fixture
def thread_id(new_thread: Callable[..., Thread]) -> str:
    """A fresh thread, deleted after the test."""
    return new_thread()["thread_id"]


def forget_thread(client: SyncLangGraphClient, thread_id: str) -> None:
    """Cancel what still runs on ``thread_id`` and delete it (gone already is fine)."""
    with contextlib.suppress(NotFoundError):
        for run in client.runs.list(thread_id, limit=100):
            if run["status"] not in TERMINAL:
                with contextlib.suppress(NotFoundError):
                    client.runs.cancel(thread_id, run["run_id"], wait=True)
        client.threads.delete(thread_id)
