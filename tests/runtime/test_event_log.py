"""The durable event log on real processes: a caller killed mid-stream and a new
process that reads ``events(after=k)`` and follows to the result; runs that
did not stream are logged too; bad input.

Every event of a durable agent's invocation is stored before any subscriber
sees it, so a reader of the log after sequence ``k`` gets exactly what the
subscriber would have got after ``k``: no gap, nothing twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from tests.helpers import assert_logged, eventually

ROOT = Path(__file__).resolve().parents[2]
CONFIG = hy.AgentConfig("ev", {"w": "tests.graph_nodes:touch_and_wait",
                               "ok": "tests.graph_nodes:worker"},
                        "tests.graph_nodes:scripted", execution_timeout=60.0)

CALLER = """
import json, sys
import hayata_py as hy
system = hy.AgentSystem.connect(int(sys.argv[1]))
agent = hy.AgentRef(system, "ev")
inv = agent.run(json.loads(sys.argv[2]), subscriber=hy.CALLER, stream=True)
print(json.dumps({"invocation": inv}), flush=True)
for message in agent.messages(inv, timeout=60):
    if isinstance(message, hy.AgentEvent):
        print(json.dumps({"seq": message.sequence, "type": message.type}), flush=True)
"""

READER = """
import json, sys
import hayata_py as hy
system = hy.AgentSystem.connect(int(sys.argv[1]))
agent = hy.AgentRef(system, "ev")
for event in agent.events(sys.argv[2], after=int(sys.argv[3]), follow=True, timeout=60):
    print(json.dumps({"seq": event.sequence, "type": event.type, "data": event.data}),
          flush=True)
system.shutdown()
"""


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _steps(tmp_path: Path, partials: int = 3) -> tuple[dict[str, Any], Path, Path]:
    """A gated node, then one that streams ``partials`` (a streamed run only)."""
    gate, pid_file = tmp_path / "gate", tmp_path / "edge.pid"
    return {"steps": [["next", "w", {"pid_file": str(pid_file), "gate": str(gate)}],
                      ["next", "ok", {"partials": partials}], ["finish", "done"]]}, gate, pid_file


@pytest.mark.timeout(120)
def test_a_caller_killed_mid_stream_and_a_new_process_follows_to_the_result(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """The caller saw events 1..k and was SIGKILLed; another process reads the log
    after k and follows it to the end: together exactly the whole stream once."""
    agents.start_agent(CONFIG)
    steps, gate, pid_file = _steps(tmp_path)
    caller = _child(CALLER, str(agents.admin_port), json.dumps(steps))
    reader: subprocess.Popen[str] | None = None
    try:
        assert caller.stdout is not None
        inv = json.loads(caller.stdout.readline())["invocation"]
        seen = [json.loads(caller.stdout.readline()) for _ in range(2)]
        assert [s["type"] for s in seen] == ["invocation_started", "node_started"]
        eventually(pid_file.exists, 30, message="the gated node runs")
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait(timeout=10)
        k = seen[-1]["seq"]
        reader = _child(READER, str(agents.admin_port), inv, str(k))
        gate.touch()  # the invocation goes on while the new reader follows
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err
    finally:
        for proc in (caller, reader):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    followed = [json.loads(line) for line in out.splitlines()]
    whole = [s["seq"] for s in seen] + [f["seq"] for f in followed]
    assert whole == list(range(1, len(whole) + 1)), whole  # no gap, nothing twice
    types = [f["type"] for f in followed]
    assert types[-1] == "invocation_completed" and followed[-1]["data"] == {"result": "done"}
    assert types.count("node_partial_result") == 3
    assert agents.agent("ev").wait(inv, 30).ok
    stored = list(agents.agent("ev").events(inv))
    assert [e.sequence for e in stored] == whole
    assert_logged(agents.store, inv, stored)


def test_a_run_without_a_stream_is_logged_and_read_by_either_api(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """No subscriber, no stream: the log still has every lifecycle event, read the
    same from the sync and the asyncio API, from any sequence on."""
    agent = agents.start_agent(CONFIG)
    inv = agent.run({"steps": [["next", "ok", {}], ["finish", 7]]})
    assert agent.wait(inv, 30).ok
    events = list(agent.events(inv, follow=True, timeout=10))  # over: it has ended
    assert [e.type for e in events] == ["invocation_started", "node_started", "node_completed",
                                        "invocation_completed"]
    assert [e.sequence for e in events] == [1, 2, 3, 4]
    assert [e.sequence for e in agent.events(inv, after=2)] == [3, 4]
    assert list(agent.events(inv, after=4, follow=True)) == []

    async def read_async() -> list[hy.AgentEvent]:
        # Another system on the same store: the log is the store's, not the agent's.
        async with hy.AsyncAgentSystem(tmp_path / "other", store_url=agents.store_url) as other:
            ref = hy.AsyncAgentRef(other, hy.AgentRef(other.sync, "ev"))
            return [e async for e in ref.events(inv, after=1)]

    assert [e.sequence for e in asyncio.run(read_async())] == [2, 3, 4]


def test_events_of_an_unknown_invocation_or_with_bad_arguments_are_refused(
        agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(CONFIG)
    with pytest.raises(hy.HayataError) as err:
        agent.events("no-such-invocation")
    assert err.value.code == "not_found" and "no-such-invocation" in str(err.value)
    inv = agent.run({"steps": [["finish", 1]]})
    assert agent.wait(inv, 30).ok
    for name, kwargs in (("after", {"after": -1}), ("after", {"after": "3"}),
                         ("timeout", {"timeout": 0}), ("timeout", {"timeout": float("nan")})):
        with pytest.raises(hy.ConfigError) as bad:
            agent.events(inv, **kwargs)  # type: ignore[arg-type]
        assert bad.value.details["field"] == name, kwargs
    with pytest.raises(hy.ConfigError):
        agent.events("")


def test_hayata_events_and_prune_read_and_trim_the_store(agents: hy.AgentSystem,
                                                         tmp_path: Path) -> None:
    """``hayata events`` prints the log (text and JSON, from --after on; exit 4 for
    an unknown invocation); ``prune`` refuses an unreadable age, keeps what is
    recent or running, and deletes finished invocations with their records."""
    from tests.cli.test_cli import hayata

    data_dir = tmp_path / "data"
    agent = agents.start_agent(CONFIG)
    done = agent.run({"steps": [["next", "ok", {}], ["finish", 1]]})
    assert agent.wait(done, 30).ok
    steps, gate, pid_file = _steps(tmp_path, partials=0)
    running = agent.run(steps)
    eventually(pid_file.exists, 30, message="the gated node runs")

    lines = hayata(data_dir, "events", "ev", done, "--after", "1", "--json")
    assert lines.returncode == 0, lines.stderr
    rows = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [(r["sequence"], r["type"]) for r in rows] == [
        (2, "node_started"), (3, "node_completed"), (4, "invocation_completed")]
    text = hayata(data_dir, "events", "ev", done)
    assert text.returncode == 0 and text.stdout.splitlines()[0].split()[:2] == [
        "1", "invocation_started"]
    missing = hayata(data_dir, "events", "ev", "nope")
    assert missing.returncode == 4 and "nope" in missing.stderr
    bad = hayata(data_dir, "prune", "--older-than", "seven days")
    assert bad.returncode == 2 and "--older-than" in bad.stderr

    with pytest.raises(hy.ConfigError) as err:
        agents.prune("soon")
    assert err.value.details["field"] == "older_than"
    assert agents.prune("1h").invocations == 0  # nothing is that old
    pruned = hayata(data_dir, "prune", "--older-than", "0s", "--json")
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout) == {"agent_id": None, "older_than": 0.0,
                                         "invocations": 1, "tasks": 1, "events": 4}
    assert agents.store.get_invocation(done) is None
    assert agents.store.get_invocation(running) is not None  # running: kept
    gate.touch()
    assert agent.wait(running, 30).ok
