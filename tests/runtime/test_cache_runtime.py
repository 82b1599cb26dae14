"""Node result caching on real processes: a cached node does not run again for
the same key, across invocations, a whole-system kill -9 and the ttl; the
task is recorded completed and cached; ``hayata cache clear`` makes it run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._cache import default_key
from tests.cache_nodes import cached_agent, ran
from tests.cli.test_cli import assert_one_line_error, hayata, ok
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)


def _run(agent: hy.AgentRef, input: Any) -> tuple[hy.AgentResult, list[hy.AgentEvent]]:
    inv = agent.run(input, subscriber=hy.CALLER, stream=True)
    messages = list(agent.messages(inv, timeout=30))
    result = messages[-1]
    assert isinstance(result, hy.AgentResult)
    return result, [m for m in messages if isinstance(m, hy.AgentEvent)]


def _completed(events: list[hy.AgentEvent]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == "node_completed"]


def test_a_cached_node_runs_once_for_the_same_input(tmp_path: Path) -> None:
    """The second invocation with the same input completes from the cache: the
    node's side effect happened once, the task is completed and cached, its
    node_completed says cached: True; another input runs the node."""
    log = str(tmp_path / "embed.log")
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(cached_agent(max_invocations=4))
        first, first_events = _run(agent, {"text": "hello", "log": log})
        assert first.ok and first.result == {"vector": [5, 1.5], "text": "hello"}
        assert [d.get("cached") for d in _completed(first_events)] == [None]
        second, second_events = _run(agent, {"text": "hello", "log": log})
        assert second.ok and second.result == first.result
        assert [d["cached"] for d in _completed(second_events)] == [True]
        assert len(ran(log)) == 1
        ((task, klass),) = agent.tasks(second.invocation_id)
        assert (task.status, task.cached, task.result, klass.value) == (
            "completed", True, first.result, "completed")
        ((earlier, _),) = agent.tasks(first.invocation_id)
        assert not earlier.cached
        other = agent.wait(agent.run({"text": "other", "log": log}), 30)
        assert other.ok and len(ran(log)) == 2
        # On a thread too: the cache is the agent's, shared by every thread.
        on_thread = agent.wait(agent.run({"text": "hello", "log": log}, thread="t1"), 30)
        assert on_thread.result == first.result and len(ran(log)) == 2
        with pytest.raises(hy.ConfigError) as bad:
            agent.clear_cache(node="")
        assert bad.value.details["field"] == "node"
        assert agent.clear_cache(node="nope") == 0
        assert agent.clear_cache(node="embed") == 2  # hello, other
        assert agent.wait(agent.run({"text": "hello", "log": log}), 30).ok
        assert len(ran(log)) == 3


def test_a_failure_is_not_cached(tmp_path: Path) -> None:
    log = str(tmp_path / "embed.log")
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(cached_agent())
        for _ in range(2):
            failed = agent.wait(agent.run({"text": "x", "log": log, "fail": True}), 30)
            assert failed.error is not None and failed.error.code == "node_failed"
        assert len(ran(log)) == 2
        assert agent.clear_cache() == 0


def test_the_cache_survives_a_whole_system_kill(tmp_path: Path) -> None:
    """kill -9 of every process, then a new system on the same data dir: the
    node still does not run for the cached input."""
    log = str(tmp_path / "embed.log")
    system = hy.AgentSystem(tmp_path / "data")
    try:
        agent = system.start_agent(cached_agent())
        assert agent.wait(agent.run({"text": "hello", "log": log}), 30).ok
    finally:
        system.kill()
    assert len(ran(log)) == 1
    with hy.AgentSystem(tmp_path / "data") as again:
        agent = again.start_agent(cached_agent())
        result = agent.wait(agent.run({"text": "hello", "log": log}), 30)
        assert result.ok and result.result == {"vector": [5, 1.5], "text": "hello"}
        assert len(ran(log)) == 1
        ((task, _),) = agent.tasks(result.invocation_id)
        assert task.cached


def test_an_expired_entry_is_not_used(tmp_path: Path) -> None:
    """After its ttl the entry is ignored: the node runs again and stores anew."""
    log = str(tmp_path / "embed.log")
    key = default_key("embed", {"text": "hello", "log": log})
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(cached_agent(ttl=0.5))
        assert agent.wait(agent.run({"text": "hello", "log": log}), 30).ok
        store = system.store
        assert store is not None and store.cache_get("cached", "embed", key) is not None
        eventually(lambda: store.cache_get("cached", "embed", key) is None, timeout=10,
                   interval=0.05,
                   message="the entry expired")
        result = agent.wait(agent.run({"text": "hello", "log": log}), 30)
        ((task, _),) = agent.tasks(result.invocation_id)
        assert not task.cached and len(ran(log)) == 2
        assert store.cache_get("cached", "embed", key) is not None  # stored anew


def test_a_key_function_decides_what_counts(tmp_path: Path) -> None:
    """With key=text_key the log path is not part of the key: a run with another
    log file completes from the cache."""
    first_log, second_log = str(tmp_path / "a.log"), str(tmp_path / "b.log")
    config = cached_agent()
    keyed = hy.AgentConfig(config.id, config.nodes, config.decision_policy,
                           cache={"embed": hy.CachePolicy(3600, key="tests.cache_nodes:text_key")})
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(keyed)
        assert agent.wait(agent.run({"text": "hi", "log": first_log}), 30).ok
        result = agent.wait(agent.run({"text": "hi", "log": second_log}), 30)
        assert result.ok and result.result["text"] == "hi"
        assert (len(ran(first_log)), len(ran(second_log))) == (1, 0)


@pytest.mark.timeout(180)
def test_hayata_cache_clear_makes_the_node_run_again(tmp_path: Path) -> None:
    """Through the CLI: run, run (cached), cache clear, run (runs again)."""
    data_dir, log = tmp_path / "data", str(tmp_path / "embed.log")
    try:
        ok(data_dir, "system", "start")
        ok(data_dir, "agent", "start", "tests.cache_nodes:config")
        payload = json.dumps({"text": "hello", "log": log})
        for _ in range(2):
            assert json.loads(ok(data_dir, "run", "cached", "--input", payload, "--json"))["ok"]
        assert len(ran(log)) == 1
        cleared = json.loads(ok(data_dir, "cache", "clear", "cached", "--node", "embed",
                                "--json"))
        assert cleared == {"agent_id": "cached", "node_id": "embed", "cleared": 1}
        assert "cleared 0 cache entries of agent cached" in ok(data_dir, "cache", "clear",
                                                                "cached")
        assert json.loads(ok(data_dir, "run", "cached", "--input", payload, "--json"))["ok"]
        assert len(ran(log)) == 2
        tasks = [json.loads(line) for line in ok(data_dir, "tasks", "cached", "--json")
                 .splitlines()]
        assert [t["cached"] for t in tasks] == [False]
    finally:
        hayata(data_dir, "system", "kill")


def test_a_parallel_step_mixes_a_cached_and_a_running_node(tmp_path: Path) -> None:
    """embed completes from the cache (committing the step's checkpoint), echo runs
    on its edge; the step's results are both, in node order."""
    log = str(tmp_path / "embed.log")
    config = hy.AgentConfig("par", {"embed": "tests.cache_nodes:embed",
                                    "echo": "tests.cache_nodes:echo"},
                            "tests.cache_nodes:parallel_then_finish",
                            cache={"embed": hy.CachePolicy(3600)})
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(config)
        first = agent.wait(agent.run({"text": "hi", "log": log}), 30)
        second, events = _run(agent, {"text": "hi", "log": log})
        assert first.ok and second.ok and second.result == first.result
        assert second.result == [{"vector": [2, 1.5], "text": "hi"}, {"echo": "hi"}]
        assert len(ran(log)) == 1
        assert sorted((d["node_id"], d.get("cached", False)) for d in _completed(events)) == [
            ("echo", False), ("embed", True)]
        cached = {t.node_id: t.cached for t, _ in agent.tasks(second.invocation_id)}
        assert cached == {"embed": True, "echo": False}


def test_the_items_of_a_map_step_are_cached_one_by_one(tmp_path: Path) -> None:
    log = str(tmp_path / "embed.log")
    config = hy.AgentConfig("mapped", {"embed": "tests.cache_nodes:embed"},
                            "tests.cache_nodes:map_then_finish",
                            cache={"embed": hy.CachePolicy(3600)})
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(config)
        first = agent.wait(agent.run({"texts": ["a", "bb"], "log": log}), 30)
        assert first.ok and len(ran(log)) == 2
        second, events = _run(agent, {"texts": ["bb", "ccc"], "log": log})
        assert second.ok and [r["text"] for r in second.result] == ["bb", "ccc"]
        assert sorted(line.split()[1] for line in ran(log)) == ["a", "bb", "ccc"]
        assert sorted((d["item"], d.get("cached", False)) for d in _completed(events)) == [
            (0, True), (1, False)]


def test_telemetry_counts_hits_and_misses(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    sink = tmp_path / "telemetry.jsonl"
    monkeypatch.setenv("HAYATA_TEST_TELEMETRY", str(sink))
    log = str(tmp_path / "embed.log")
    handlers = {"sink": ("tests.telemetry_sink:record",
                         [("hayata", "cache", "hit"), ("hayata", "cache", "miss")])}
    with hy.AgentSystem(tmp_path / "data", telemetry_handlers=handlers) as system:
        agent = system.start_agent(cached_agent())
        runs = [agent.wait(agent.run({"text": t, "log": log}), 30) for t in ("x", "x", "y")]
        assert all(r.ok for r in runs)
    rows = [json.loads(line) for line in sink.read_text().splitlines()]
    assert [(r["event"][2], r["metadata"]["invocation_id"]) for r in rows] == [
        ("miss", runs[0].invocation_id), ("hit", runs[1].invocation_id),
        ("miss", runs[2].invocation_id)]
    assert all(r["measurements"] == {"count": 1} and r["metadata"]["node_id"] == "embed"
               and r["metadata"]["agent_id"] == "cached" for r in rows)


def _crashable() -> hy.AgentConfig:
    return hy.AgentConfig("crashable", {"embed": "tests.cache_nodes:embed",
                                        "gated": "tests.cache_nodes:gated"},
                          "tests.cache_nodes:embed_beside_gated",
                          idempotent_nodes=frozenset({"gated"}), execution_timeout=60.0,
                          cache={"embed": hy.CachePolicy(3600, key="tests.cache_nodes:text_key")})


def test_recovery_reuses_a_cached_task_after_a_whole_system_kill(tmp_path: Path) -> None:
    """kill -9 of everything while a step runs whose other task came from the
    cache: the store has the cached task completed (with the step's checkpoint),
    recovery classifies it completed and reuses it; only the other task reruns."""
    log = str(tmp_path / "embed.log")

    def payload(name: str) -> dict[str, Any]:
        return {"text": "hi", "log": log, "gate": str(tmp_path / f"{name}.gate"),
                "started": str(tmp_path / f"{name}.started")}

    (tmp_path / "first.gate").touch()
    system = hy.AgentSystem(tmp_path / "data")
    try:
        agent = system.start_agent(_crashable())
        assert agent.wait(agent.run(payload("first")), 30).ok
        inv = agent.run(payload("second"))
        eventually(lambda: (tmp_path / "second.started").exists(), timeout=30,
                   message="gated started")
    finally:
        system.kill()
    assert len(ran(log)) == 1
    with hy.AgentSystem(tmp_path / "data") as again:
        agent = again.start_agent(_crashable())
        classes = {t.node_id: (t.status, t.cached, c.value) for t, c in agent.tasks(inv)}
        assert classes == {"embed": ("completed", True, "completed"),
                           "gated": ("started", False, "rerun")}
        (tmp_path / "second.gate").touch()
        assert agent.recover() == inv
        result = agent.wait(inv, 60)
        assert result.ok, result
        assert result.result == [{"vector": [2, 1.5], "text": "hi"}, {"gated": True}]
        assert len(ran(log)) == 1


def test_hayata_cache_clear_without_a_system_is_one_line(tmp_path: Path) -> None:
    done = hayata(tmp_path / "none", "cache", "clear", "cached")
    assert_one_line_error(done, "no hayata system is running")
    assert done.returncode == 3
