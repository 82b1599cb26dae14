"""The observer over real HTTP, on a real system: who may change what, bad input,
and the recovery actions (resolve, recover, abandon) with their events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._observer import Observer, observe
from tests.cli_fixtures import config
from tests.helpers import alive, eventually, find
from tests.observer_util import Client, everything, uncertain_slow

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def drill(tmp_path: Path) -> Iterator[tuple[hy.AgentSystem, Observer, Client, str, str]]:
    """A system with agent ``hello`` and agent ``slow`` holding an unfinished invocation
    with one uncertain task, and an observer page on it."""
    with hy.AgentSystem(tmp_path / "data") as system:
        system.start_agent(config)
        _ref, invocation_id, task_id = uncertain_slow(system, tmp_path)
        with observe(system, port=0) as observer:
            yield system, observer, Client(observer.url), invocation_id, task_id


def actions(system: hy.AgentSystem, invocation_id: str, task_id: str
            ) -> list[tuple[str, dict[str, Any]]]:
    """One request of each kind, each of which would change something if accepted."""
    tree = system.tree()
    node, agent = find(tree, "node", "node:echo"), find(tree, "agent")
    assert node is not None and agent is not None
    return [("/api/kill", {"path": ["agent:hello", "nodes", "node:echo"], "pid": node["pid"]}),
            ("/api/kill", {"path": ["agent:hello", "agent"], "pid": agent["pid"]}),
            ("/api/run", {"agent": "hello", "input": "x"}),
            ("/api/recover", {"agent": "slow"}),
            ("/api/resolve", {"agent": "slow", "task_id": task_id, "result": {"ok": True}}),
            ("/api/abandon", {"agent": "slow", "invocation_id": invocation_id})]


def test_requests_without_the_token_or_from_another_origin_change_nothing(
        drill: tuple[hy.AgentSystem, Observer, Client, str, str]) -> None:
    system, _observer, client, invocation_id, task_id = drill
    before = everything(system)
    requests = actions(system, invocation_id, task_id)
    refusals = {
        "no token": ({"token": None}, 403, "token_missing"),
        "wrong token": ({"token": "not-the-token"}, 403, "token_invalid"),
        "another origin": ({"origin": "http://evil.example"}, 403, "cross_origin"),
        "no origin": ({"origin": None}, 403, "origin_missing"),
        "cross-site fetch": ({"headers": {"Sec-Fetch-Site": "cross-site"}}, 403,
                             "cross_origin"),
        "a form post": ({"content_type": "application/x-www-form-urlencoded"}, 415,
                        "not_json"),
        "another host (DNS rebinding)": ({"headers": {"Host": "evil.example"}}, 400,
                                         "bad_host"),
    }
    for path, body in requests:
        for what, (kwargs, status, code) in refusals.items():
            got, answer = client.post(path, body, **kwargs)
            assert (got, answer["error"]["code"]) == (status, code), (what, path, answer)
        # The token in the URL is for reads only (the page's event stream).
        got, answer = client.post(f"{path}?token={client.token}", body, token=None)
        assert (got, answer["error"]["code"]) == (403, "token_missing"), (path, answer)
        got, _answer = client.request("GET", f"{path}?token={client.token}")
        assert got == 405, path
    assert client.request("GET", "/api/ping", token=None)[0] == 403
    assert client.request("GET", "/api/ping", token="wrong")[0] == 403
    assert client.request("GET", f"/api/ping?token={client.token}", token=None)[0] == 200
    assert everything(system) == before

    # The control: the same request, sent by the page, does change things.
    path, body = requests[0]
    got, answer = client.post(path, body)
    assert got == 200, answer
    assert answer["killed"] == body["pid"]
    assert answer["cli"].startswith("hayata kill hello --node echo")
    eventually(lambda: not alive(body["pid"]), message="the node process is gone")


def test_bad_input_is_a_clear_error_and_changes_nothing(
        drill: tuple[hy.AgentSystem, Observer, Client, str, str]) -> None:
    system, _observer, client, invocation_id, task_id = drill
    before = everything(system)
    node = find(system.tree(), "node", "node:echo")
    assert node is not None
    cases: list[tuple[str, Any, int, str, str]] = [
        ("/api/run", {"agent": "nobody", "input": 1}, 404, "agent_not_found", "nobody"),
        ("/api/recover", {"agent": "nobody"}, 404, "agent_not_found", "nobody"),
        ("/api/abandon", {"agent": "nobody", "invocation_id": invocation_id}, 404,
         "agent_not_found", "nobody"),
        ("/api/resolve", {"agent": "slow", "task_id": "task-nope", "result": {}}, 404,
         "task_not_found", "task-nope"),
        ("/api/resolve", {"agent": "hello", "task_id": task_id, "result": {}}, 409,
         "nothing_to_resolve", "no unfinished invocation"),
        ("/api/resolve", {"agent": "slow", "task_id": task_id, "result": [1]}, 400,
         "invalid_result", "JSON object"),
        ("/api/abandon", {"agent": "slow", "invocation_id": "inv-nope"}, 404,
         "invocation_not_found", invocation_id),
        ("/api/kill", {"path": ["agent:hello", "nodes", "node:nope"], "pid": 1}, 404,
         "actor_not_found", "node:nope"),
        ("/api/kill", {"path": ["agent:hello", "nodes", "node:echo"], "pid": node["pid"] + 1},
         409, "pid_changed", f"now runs as pid {node['pid']}"),
        ("/api/kill", {"path": "agent:hello", "pid": 1}, 400, "invalid_field", "'path'"),
        ("/api/kill", {"path": ["agent:hello"], "pid": True}, 400, "invalid_field", "'pid'"),
        ("/api/run", {"input": 1}, 400, "invalid_field", "'agent'"),
        ("/api/run", b"{not json", 400, "invalid_json", "not valid JSON"),
        ("/api/run", [1, 2], 400, "invalid_json", "JSON object"),
    ]
    for path, body, status, code, words in cases:
        got, answer = client.post(path, body)
        assert (got, answer["error"]["code"]) == (status, code), (path, body, answer)
        assert words in answer["error"]["message"], (path, answer)
    got, answer = client.request("GET", "/api/tasks?agent=slow&invocation=inv-nope")
    assert (got, answer["error"]["code"]) == (404, "invocation_not_found")
    got, answer = client.request("GET", f"/api/tasks?agent=hello&invocation={invocation_id}")
    assert (got, answer["error"]["code"]) == (404, "invocation_not_found")
    assert everything(system) == before


def test_resolve_then_recover_streams_the_events_in_order(
        drill: tuple[hy.AgentSystem, Observer, Client, str, str]) -> None:
    system, _observer, client, invocation_id, task_id = drill
    got, answer = client.request("GET", f"/api/tasks?agent=slow&invocation={invocation_id}")
    assert got == 200
    assert [(t["task_id"], t["classification"]) for t in answer["tasks"]] == [
        (task_id, "uncertain")]

    got, answer = client.post("/api/recover", {"agent": "slow"})
    assert (got, answer["error"]["code"]) == (409, "task_execution_uncertain"), answer
    assert answer["error"]["details"]["task_ids"] == [task_id]

    got, answer = client.post("/api/resolve", {"agent": "slow", "task_id": task_id,
                                               "result": {"gate": "checked"}})
    assert got == 200, answer
    assert answer["cli"].startswith(f"hayata resolve slow {task_id} --result "
                                    "'{\"gate\": \"checked\"}' --data-dir ")
    got, answer = client.request("GET", f"/api/tasks?agent=slow&invocation={invocation_id}")
    [task] = answer["tasks"]
    assert (task["classification"], task["resolved"], task["result"]) == (
        "completed", True, {"gate": "checked"})

    stream = client.messages()
    try:
        assert next(stream)["kind"] == "state"  # the stream is open before recovering
        got, answer = client.post("/api/recover", {"agent": "slow"})
        assert (got, answer["invocation_id"]) == (200, invocation_id), answer
        assert answer["cli"].startswith("hayata recover slow --stream")
        mine = []
        for message in stream:
            if message.get("invocation_id") == invocation_id:
                mine.append(message)
                if message["kind"] == "result":
                    break
    finally:
        stream.close()
    events, result = mine[:-1], mine[-1]
    # Numbered on from the first run's logged events (how many were logged
    # before the kill depends on timing: they wait up to 10 ms for their write).
    first = events[0]["sequence"]
    assert [e["sequence"] for e in events] == list(range(first, first + len(events)))
    assert events[0]["type"] == "invocation_started" and events[0]["data"]["recovered"]
    assert events[-1]["type"] == "invocation_completed"
    assert result["ok"] and result["result"] == {"gate": "checked"}
    stored = system.store.get_invocation(invocation_id)
    assert stored is not None and stored.status == "completed"


def test_abandon_ends_the_unfinished_invocation(
        drill: tuple[hy.AgentSystem, Observer, Client, str, str]) -> None:
    system, _observer, client, invocation_id, _task_id = drill
    got, answer = client.post("/api/abandon", {"agent": "slow",
                                               "invocation_id": invocation_id})
    assert got == 200, answer
    assert answer["cli"].startswith(f"hayata abandon slow {invocation_id}")
    stored = system.store.get_invocation(invocation_id)
    assert stored is not None and stored.status == "failed"
    assert stored.error is not None and stored.error["code"] == "abandoned"
    assert system.agent("slow").status() == "idle"
    got, answer = client.post("/api/abandon", {"agent": "slow",
                                               "invocation_id": invocation_id})
    assert (got, answer["error"]["code"]) == (404, "invocation_not_found")


def test_the_page_itself_holds_no_data_and_the_stream_says_when_the_system_dies(
        tmp_path: Path) -> None:
    import urllib.request

    system = hy.AgentSystem(tmp_path / "data")
    try:
        system.start_agent(config)
        with observe(system, port=0) as observer:
            client = Client(observer.url)
            with urllib.request.urlopen(client.base + "/", timeout=30) as response:
                page = response.read().decode()
                headers = response.headers
            assert "hayata observer" in page and client.token not in page
            assert "hello" not in page  # the data comes only with the token
            assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
            assert headers["Referrer-Policy"] == "no-referrer"

            stream = client.messages()
            try:
                first = next(stream)
                assert first["alive"] and [a["id"] for a in first["agents"]] == ["hello"]
                system.kill()
                # (While it dies, a poll may first fail to read the tree.)
                last = next(m for m in stream if m["kind"] == "state"
                            and "is not running" in (m["error"] or ""))
            finally:
                stream.close()
            assert not last["alive"] and last["tree"] is None
    finally:
        system.kill()
        system.shutdown()
