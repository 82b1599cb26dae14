"""``hayata serve`` driven by LangGraph's JS client, ``@langchain/langgraph-sdk``
from npm (the version pinned in tests/serve/js/package.json), on Node.js.

``npm ci`` installs tests/serve/js/package-lock.json into its
``node_modules`` (once: skipped while that folder holds exactly the lock);
then ``node conversation.mjs URL`` holds one conversation with a server of
tests/serve_api's graphs and prints each stream event as a JSON line. Node
and npm come from ``make node`` (tests/node.py); without them this fails
with one line saying what to install, and never skips.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import node
from tests.serve.launch import Served, hayata_serve
from tests.serve_api.graphs import CHAT_REPLY

pytestmark = pytest.mark.timeout(600)

JS = Path(__file__).resolve().parent / "js"
RUN_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def node_client() -> node.Node:
    """Node and npm, with the JS SDK installed into tests/serve/js."""
    found = node.find()
    if found is None:
        pytest.fail(node.MISSING)
    took = node.npm_ci(JS, found)
    print("npm ci: cached" if took is None else f"npm ci: {took:.1f}s")
    return found


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with hayata_serve() as server:
        yield server


def _lines(node_client: node.Node, served: Served) -> list[dict[str, Any]]:
    started = time.monotonic()
    done = subprocess.run([node_client.node, "conversation.mjs", served.url], cwd=JS,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    print(f"node conversation.mjs: {time.monotonic() - started:.1f}s")
    assert done.returncode == 0, f"node exited {done.returncode}:\n{done.stderr[-4000:]}"
    return [json.loads(line) for line in done.stdout.splitlines()]


def _step(lines: list[dict[str, Any]], step: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["step"] == step]


def _result(lines: list[dict[str, Any]], step: str) -> Any:
    [line] = _step(lines, step)
    return line["result"]


def test_a_streamed_conversation_with_the_js_sdk(node_client: node.Node,
                                                  served: Served) -> None:
    """Thread, a run streamed in ``values``/``updates``/``messages-tuple``, its
    stream joined after event 2, then an interrupt answered with
    ``command: {resume}``: what the JS SDK hands a JS app."""
    lines = _lines(node_client, served)
    assert _result(lines, "thread")["metadata"] == {"client": "js"}

    chat = _step(lines, "chat")
    events = [e["event"] for e in chat]
    assert events[0] == "metadata" and events[1] == "values", events
    assert "updates" in events and events[-1] == "values", events
    assert set(events) == {"metadata", "values", "updates", "messages"}, events
    # Ids are the run's log sequence: integers, increasing (the log also holds
    # this run's custom events, which a stream without "custom" leaves out).
    ids = [int(e["id"]) for e in chat]
    assert ids[0] == 1 and ids == sorted(set(ids)), ids
    run_id = chat[0]["data"]["run_id"]
    assert _result(lines, "created") == {"run_id": run_id,
                                         "thread_id": _result(lines, "thread")["thread_id"]}

    # messages-tuple: [chunk, metadata]; the chunks of one message share its id
    # and add up to the reply the final values carry.
    tokens = [e["data"] for e in chat if e["event"] == "messages"]
    assert len(tokens) > 1
    assert {chunk["type"] for chunk, _meta in tokens} == {"AIMessageChunk"}
    assert {meta["langgraph_node"] for _chunk, meta in tokens} == {"respond"}
    [message_id] = {chunk["id"] for chunk, _meta in tokens}
    assert "".join(chunk["content"] for chunk, _meta in tokens) == CHAT_REPLY
    [update] = [e["data"] for e in chat if e["event"] == "updates"]
    assert update["respond"]["messages"][0]["content"] == CHAT_REPLY
    final = chat[-1]["data"]["messages"]
    assert [(m["type"], m["content"]) for m in final] == [("human", "hi from node"),
                                                         ("ai", CHAT_REPLY)]
    assert final[1]["id"] == message_id
    assert _result(lines, "state") == chat[-1]["data"]

    # joinStream with Last-Event-ID 2: exactly the events after id 2.
    after = [(e["event"], e["id"], e["data"]) for e in chat if int(e["id"]) > 2]
    assert [(e["event"], e["id"], e["data"]) for e in _step(lines, "join")] == after

    # interrupt(), then Command(resume="yes").
    asked = _step(lines, "ask")[-1]
    assert asked["event"] == "values"
    assert [i["value"] for i in asked["data"]["__interrupt__"]] == [{"question": "go?"}]
    assert _result(lines, "asked") == "interrupted"
    resumed = _step(lines, "resume")
    assert resumed[-1]["data"] == {"question": "go?", "answer": "yes", "done": True}
    assert _result(lines, "answered") == "idle"
