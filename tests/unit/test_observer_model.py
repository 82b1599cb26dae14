"""The observer's pure parts: tree annotation and commands, request checks, the hub."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from click.testing import CliRunner

from hayata_py._observer import _model, _security
from hayata_py._observer._hub import Hub
from hayata_py.cli import cli

TREE: dict[str, Any] = {
    "role": "supervisor", "id": "hayata", "pid": None, "restarts": 0, "status": "running",
    "children": [{
        "role": "supervisor", "id": "agent:a b", "pid": 10, "restarts": 0, "status": "running",
        "remote": False, "children": [
            {"role": "supervisor", "id": "nodes", "pid": 11, "restarts": 1,
             "status": "running", "remote": False, "children": [
                 {"role": "edge_watcher", "id": "edge_watcher", "pid": 12, "children": []},
                 {"role": "node", "id": "node:fetch", "pid": 13, "children": [
                     {"role": "edge", "id": "fetch.edge-1", "pid": 14, "children": []},
                     {"role": "reducer", "id": "fetch.reducer", "pid": 15, "children": []}]},
                 {"role": "node", "id": "node:gpu", "pid": 16, "remote": True, "children": [
                     {"role": "edge", "id": "gpu.edge-1", "pid": 17, "children": []}]},
                 {"role": "node", "id": "node:down", "pid": None, "status": "restarting",
                  "children": []}]},
            {"role": "agent", "id": "agent", "pid": 18, "children": []}]}]}


def rows() -> dict[str, dict[str, Any]]:
    return {"/".join(r["path"]): r for r in _model.walk(_model.annotate(TREE, " --data-dir d"))}


@pytest.mark.parametrize(("path", "cli", "killable"), [
    ("", None, False),
    ("agent:a b", "hayata kill 'a b' --supervisor --data-dir d", True),
    ("agent:a b/nodes", "kill -9 11", True),
    ("agent:a b/nodes/edge_watcher", "kill -9 12", True),
    ("agent:a b/nodes/node:fetch", "hayata kill 'a b' --node fetch --data-dir d", True),
    ("agent:a b/nodes/node:fetch/fetch.edge-1", "kill -9 14", True),
    ("agent:a b/nodes/node:fetch/fetch.reducer", "hayata kill 'a b' --reducer fetch --data-dir d",
     True),
    # A remote node and what runs below it are on another host: not killable from here.
    ("agent:a b/nodes/node:gpu", "hayata kill 'a b' --node gpu --data-dir d", False),
    ("agent:a b/nodes/node:gpu/gpu.edge-1", "kill -9 17", False),
    ("agent:a b/nodes/node:down", None, False),
    ("agent:a b/agent", "hayata kill 'a b' --agent --data-dir d", True),
])
def test_each_row_names_its_kill_command(path: str, cli: str | None, killable: bool) -> None:
    row = rows()[path]
    assert (row["cli"], row["killable"]) == (cli, killable)
    assert row["agent"] == (None if not path else "a b")


def test_find_path_reads_the_tree_generically() -> None:
    found = _model.find_path(TREE, ["agent:a b", "nodes", "node:fetch", "fetch.reducer"])
    assert found is not None and found["pid"] == 15
    assert _model.find_path(TREE, ["agent:a b", "nope"]) is None
    assert _model.find_path(TREE, []) is TREE


def test_commands_quote_what_a_shell_would_split() -> None:
    assert _model.resolve_command("a", "task-1", '{"x": "it\'s"}', "") == (
        "hayata resolve a task-1 --result '{\"x\": \"it'\"'\"'s\"}'")
    assert _model.run_command("a", "null", " --data-dir d") == (
        "hayata run a --input null --stream --data-dir d")
    assert "abandon" not in _model.agent_commands("a", None, "")
    assert _model.agent_commands("a", "inv", "")["abandon"] == "hayata abandon a inv"


TOKEN = "t0ken"
HOSTS = _security.allowed_hosts("127.0.0.1")
GOOD = {"host": "127.0.0.1:8765", "origin": "http://127.0.0.1:8765",
        "x-hayata-token": TOKEN, "content-type": "application/json; charset=utf-8"}


@pytest.mark.parametrize(("method", "change", "query", "expected"), [
    ("POST", {}, None, None),
    ("GET", {"origin": None, "content-type": None}, None, None),
    ("GET", {"x-hayata-token": None}, TOKEN, None),
    ("GET", {"x-hayata-token": None}, None, "token_missing"),
    ("GET", {"x-hayata-token": None}, "wrong", "token_invalid"),
    ("POST", {"x-hayata-token": None}, TOKEN, "token_missing"),
    ("POST", {"x-hayata-token": "t0ke"}, None, "token_invalid"),
    ("POST", {"origin": None}, None, "origin_missing"),
    ("POST", {"origin": "http://127.0.0.1:9999"}, None, "cross_origin"),
    ("POST", {"origin": "https://127.0.0.1:8765"}, None, "cross_origin"),
    ("POST", {"origin": "null"}, None, "cross_origin"),
    ("POST", {"sec-fetch-site": "same-site"}, None, "cross_origin"),
    ("POST", {"content-type": "text/plain"}, None, "not_json"),
    ("POST", {"host": "attacker.example:8765"}, None, "bad_host"),
    ("GET", {"host": "attacker.example:8765"}, TOKEN, "bad_host"),
    ("POST", {"host": "localhost:8765", "origin": "http://localhost:8765"}, None, None),
    ("DELETE", {}, None, None),
])
def test_request_checks(method: str, change: dict[str, str | None], query: str | None,
                        expected: str | None) -> None:
    headers = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    refusal = _security.check(method, headers, query, TOKEN, HOSTS)
    assert (refusal.code if refusal else None) == expected


def test_allowed_hosts() -> None:
    assert _security.allowed_hosts("0.0.0.0") is None
    assert "10.0.0.2" in (_security.allowed_hosts("10.0.0.2") or set())
    assert _security.host_name("[::1]:8765") == "::1"
    assert _security.new_token() != _security.new_token()


def test_hub_replays_history_once_then_streams_in_order() -> None:
    async def scenario() -> list[list[Any]]:
        hub = Hub()
        hub.bind(asyncio.get_running_loop())
        sent = threading.Thread(target=lambda: [
            hub.publish({"kind": "event", "invocation_id": "i", "sequence": n})
            for n in range(1, 201)])
        sent.start()
        await asyncio.to_thread(sent.join)
        await asyncio.sleep(0)  # the loop delivers what the thread handed over
        early = hub.subscribe()
        first = [await anext(early) for _ in range(200)]
        hub.publish({"kind": "state", "n": 1})
        hub.publish({"kind": "event", "invocation_id": "i", "sequence": 201})
        later = hub.subscribe()
        got = [await anext(early), await anext(early)]
        replay = [await anext(later) for _ in range(202)]
        assert hub.wanted.is_set()
        hub.close()
        tail = [m async for m in early]
        await early.aclose()
        await later.aclose()
        assert not hub.wanted.is_set()
        return [first, got, replay, tail]

    first, got, replay, tail = asyncio.run(scenario())
    assert [m["sequence"] for m in first] == list(range(1, 201))
    assert got == [{"kind": "state", "n": 1},
                   {"kind": "event", "invocation_id": "i", "sequence": 201}]
    assert replay[0] == {"kind": "state", "n": 1}
    assert [m["sequence"] for m in replay[1:]] == list(range(1, 202))
    assert tail == []


def test_help() -> None:
    done = CliRunner().invoke(cli, ["observe", "--help"], prog_name="hayata")
    assert done.exit_code == 0, done.output
    assert "--port" in done.output and "--bind" in done.output and "token" in done.output
