"""The service agent from the shell: ``hayata run --thread``, ``--multitask``,
``--detach``, ``hayata thread(s)``, ``hayata unfinished`` and the counts in
``hayata agent list`` (examples/service.py's agent, real processes)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hayata_py as hy
from examples.drills.service import config as drill_config
from examples.service import main
from tests.cli.test_cli import hayata, json_lines, ok

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    try:
        ok(path, "system", "start")
        ok(path, "agent", "start", "examples.service:config")
        yield path
    finally:
        hayata(path, "system", "kill")


def test_threads_from_the_shell(data_dir: Path) -> None:
    question = json.dumps({"question": "hi"})
    first = json.loads(ok(data_dir, "run", "service", "--thread", "user-1", "--input", question,
                          "--json"))
    second = json.loads(ok(data_dir, "run", "service", "--thread", "user-1", "--input",
                           question, "--json"))
    assert (first["result"]["turns"], second["result"]["turns"]) == (1, 2)
    assert second["result"]["thread"] == "user-1"
    shown = json.loads(ok(data_dir, "thread", "service", "user-1", "--json"))
    assert (shown["version"], shown["status"], shown["state"]["turns"]) == (2, "idle", 2)
    assert [i["invocation_id"] for i in shown["invocations"]] == [second["invocation_id"],
                                                                   first["invocation_id"]]
    detached = ok(data_dir, "run", "service", "--thread", "user-2", "--input", question,
                  "--detach").strip()
    waited = json.loads(ok(data_dir, "result", "service", detached, "--wait", "--json"))
    assert waited["ok"] and waited["result"]["thread"] == "user-2"
    listed = json_lines(ok(data_dir, "threads", "service", "--json"))
    assert [t["thread_id"] for t in listed] == ["user-1", "user-2"]
    assert "user-1" in ok(data_dir, "threads", "service")
    [agent] = json_lines(ok(data_dir, "agent", "list", "--json"))
    assert agent["invocations"] == {"running": 0, "paused": 0, "unfinished": 0,
                                    "max_invocations": 1000}
    assert ok(data_dir, "unfinished", "service", "--json") == ""
    missing = hayata(data_dir, "thread", "service", "nobody")
    assert missing.returncode == 4 and "not_found" in missing.stderr
    bad = hayata(data_dir, "run", "service", "--thread", "x" * 300, "--detach")
    assert bad.returncode != 0 and "thread" in bad.stderr


def test_the_service_example_runs_two_turns_of_many_conversations(
        capsys: pytest.CaptureFixture[str]) -> None:
    main(20)
    out = capsys.readouterr().out
    assert "turn 1: 20 conversations" in out and "turn 2: 20 conversations" in out
    assert "thread user-0: version 2, state turns=2" in out


def test_the_drill_service_agent_records_what_ran_and_holds_at_its_gate(tmp_path: Path) -> None:
    """examples/drills/service.py (VM_RECOVERY_TESTS.md, drill 10): each node writes its
    effect line, and ``llm`` answers only once the gate file exists."""
    effects, gate = tmp_path / "effects.log", tmp_path / "gate"
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(drill_config())
        inv = agent.run({"question": "q", "delay": 0, "gate": str(gate), "effects": str(effects)},
                        thread="user-1")
        deadline = time.monotonic() + 30
        while "run llm" not in (effects.read_text() if effects.exists() else ""):
            assert time.monotonic() < deadline, "llm never started"
            time.sleep(0.02)
        with pytest.raises(TimeoutError):  # held at the gate
            agent.wait(inv, timeout=0.5)
        gate.touch()
        result = agent.wait(inv, timeout=30)
    assert result.ok and result.result["turns"] == 1
    lines = [line.split()[:3] for line in effects.read_text().splitlines()]
    assert lines == [["run", node, inv] for node in ("plan", "llm", "answer")]
