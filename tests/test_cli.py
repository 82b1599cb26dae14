"""The ``hayata`` command line, driven as a user would: in subprocesses.

Every test that starts a system kills it in a ``finally`` (``system kill``),
so no process outlives the test even when an assertion fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from hayata_py.cli import cli
from tests.helpers import alive, eventually

ROOT = Path(__file__).resolve().parents[1]
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k not in ("SUPERVISORS_LOG_FILE", "HAYATA_TELEMETRY_HANDLERS", "HAYATA_DATA_DIR")}

pytestmark = pytest.mark.timeout(60)


def hayata(data_dir: Path, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hayata_py ARGS --data-dir DATA_DIR`` from the repository root."""
    return subprocess.run([sys.executable, "-m", "hayata_py", *args, "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=CLEAN_ENV, check=False)


def ok(data_dir: Path, *args: str) -> str:
    done = hayata(data_dir, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def record(data_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((data_dir / "system.json").read_text())
    return data


def session_pids(session_id: int) -> set[int]:
    found = set()
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == session_id and alive(proc.pid):
                found.add(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def tree(data_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok(data_dir, "ps", "--json"))
    return data


def find(row: dict[str, Any], *path: str) -> dict[str, Any]:
    for child_id in path:
        row = next(c for c in row["children"] if c["id"] == child_id)
    return row


def assert_one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: ")
    for word in words:
        assert word in lines[0]


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A started system's data dir; the system is killed afterwards whatever happens."""
    path = tmp_path / "data"
    try:
        ok(path, "system", "start")
        yield path
    finally:
        hayata(path, "system", "kill")


def test_drill_start_run_ps_kill_node_crash_restart(data_dir: Path) -> None:
    """The acceptance drill (minus `tasks`/`result` after the restart: they need the store)."""
    assert "started agent hello" in ok(data_dir, "agent", "start", "tests.cli_fixtures:config")
    refused = hayata(data_dir, "system", "start")
    assert_one_line_error(refused, "already running")

    out = ok(data_dir, "run", "hello", "--input", '"hi"', "--stream", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    events, result = lines[:-1], lines[-1]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events] == ["invocation_started", "node_started",
                                           "node_completed", "invocation_completed"]
    assert {e["kind"] for e in events} == {"event"}
    assert result == {"kind": "result", "invocation_id": events[0]["invocation_id"], "ok": True,
                      "result": {"answer": "echo:hi"}, "error": None}

    before = tree(data_dir)
    agent_sup = find(before, "agent:hello")
    node = find(agent_sup, "nodes", "node:echo")
    assert f"node node:echo  pid {node['pid']}  restarts 0" in ok(data_dir, "ps")
    others = [agent_sup["pid"], find(agent_sup, "nodes")["pid"], find(agent_sup, "agent")["pid"],
              find(agent_sup, "nodes", "edge_watcher")["pid"]]

    assert ok(data_dir, "kill", "hello", "--node", "echo").startswith(f"killed pid {node['pid']} ")
    eventually(lambda: not alive(node["pid"]), message="killed node gone")

    def restarted() -> dict[str, Any] | None:
        row = find(tree(data_dir), "agent:hello", "nodes", "node:echo")
        return row if row["pid"] not in (None, node["pid"]) else None

    new_node = eventually(restarted, message="node restarted")
    assert new_node["restarts"] == 1
    assert all(alive(pid) for pid in others)
    assert f"pid {new_node['pid']}  restarts 1" in ok(data_dir, "ps")
    assert '"answer":"echo:again"' in ok(data_dir, "run", "hello", "--input", '"again"')

    session = record(data_dir)["session_id"]
    assert session_pids(session)
    assert "killed" in ok(data_dir, "system", "kill")
    assert session_pids(session) == set()
    assert_one_line_error(hayata(data_dir, "ps"), "not running", "hayata system start")

    restarted_out = ok(data_dir, "system", "start")
    assert "cleaned up the dead system" in restarted_out
    assert record(data_dir)["session_id"] != session
    assert "hello" not in ok(data_dir, "agent", "list")


def test_start_cleans_up_orphans_of_a_crashed_admin(data_dir: Path) -> None:
    ok(data_dir, "agent", "start", "tests.cli_fixtures:config")
    old = record(data_dir)
    os.kill(old["admin_pid"], signal.SIGKILL)
    eventually(lambda: not alive(old["admin_pid"]), message="admin gone")
    assert_one_line_error(hayata(data_dir, "system", "status"), "not running")
    # Actors die with their parent (PR_SET_PDEATHSIG); Thespian's logger outlives the admin.
    survivors = session_pids(old["session_id"])

    out = ok(data_dir, "system", "start")
    assert "cleaned up the dead system" in out
    if survivors:
        assert "orphan process(es)" in out or "no process of it was left" in out
    assert session_pids(old["session_id"]) == set()
    status = json.loads(ok(data_dir, "system", "status", "--json"))
    assert status["running"] and status["agents"] == []


def test_agent_commands_run_failures_and_detach(data_dir: Path, tmp_path: Path) -> None:
    ok(data_dir, "agent", "start", "tests.cli_fixtures:failing")
    ok(data_dir, "agent", "start", "tests.cli_fixtures:slow")  # a factory function
    listed = [json.loads(line) for line in ok(data_dir, "agent", "list", "--json").splitlines()]
    assert listed == [{"id": "failing", "status": "idle", "invocation": None},
                      {"id": "slow", "status": "idle", "invocation": None}]

    failed = hayata(data_dir, "run", "failing", "--json")
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["error"]["code"] == "node_failed"
    text = hayata(data_dir, "run", "failing")
    assert text.returncode == 1 and "node_failed" in text.stderr

    gate = tmp_path / "gate"
    run = subprocess.Popen(
        [sys.executable, "-m", "hayata_py", "run", "slow", "--input", json.dumps(str(gate)),
         "--stream", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=CLEAN_ENV)
    try:
        assert "invocation_started" in (run.stdout.readline() if run.stdout else "")
        run.send_signal(signal.SIGINT)
        _out, err = run.communicate(timeout=20)
    finally:
        run.kill()
    assert run.returncode == 130
    hint = err.strip().splitlines()[-1]
    assert "keeps running" in hint and "hayata result slow " in hint
    invocation = hint.split("hayata result slow ")[1].split()[0]
    statuses = [json.loads(line) for line in ok(data_dir, "agent", "list", "--json").splitlines()]
    assert {"id": "slow", "status": "running", "invocation": invocation} in statuses
    assert hayata(data_dir, "result", "slow", invocation).returncode == 5  # still running
    gate.touch()
    waited = json.loads(ok(data_dir, "result", "slow", invocation, "--wait", "--json"))
    assert waited["ok"] and waited["result"] == {"gate": True}

    assert "stopped agent slow" in ok(data_dir, "agent", "stop", "slow")
    assert_one_line_error(hayata(data_dir, "agent", "stop", "slow"), "slow")
    assert_one_line_error(hayata(data_dir, "run", "slow"), "no agent 'slow'")
    assert_one_line_error(hayata(data_dir, "result", "failing", "nope"), "nope")
    assert_one_line_error(hayata(data_dir, "kill", "slow", "--agent"), "slow")
    assert_one_line_error(hayata(data_dir, "agent", "start", "tests.cli_fixtures:failing"),
                          "already started")


ERRORS = [
    (("run", "hello", "--input", "{nope"), ("--input is not valid JSON",)),
    (("agent", "start", "no_such_module_xyz:config"), ("cannot import module",)),
    (("agent", "start", "tests.cli_fixtures:missing"), ("no attribute 'missing'",)),
    (("agent", "start", "tests.cli_fixtures:not_a_config"), ("not a hayata_py.AgentConfig",)),
    (("ps",), ("no hayata system is running", "hayata system start")),
    (("agent", "start", "no_colon"), ("not MODULE:ATTR",)),
    (("system", "kill"), ("nothing to kill",)),
    (("kill", "hello"), ("exactly one of",)),
]


def test_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    """User mistakes without a running system (all commands run concurrently)."""
    procs = [subprocess.Popen([sys.executable, "-m", "hayata_py", *args, "--data-dir",
                               str(tmp_path / "none")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=CLEAN_ENV)
             for args, _words in ERRORS]
    for proc, (args, words) in zip(procs, ERRORS, strict=True):
        out, err = proc.communicate(timeout=30)
        done = subprocess.CompletedProcess(args, proc.returncode, out, err)
        assert_one_line_error(done, *words)


@pytest.mark.parametrize("command", [
    [], ["system"], ["system", "start"], ["system", "status"], ["system", "stop"],
    ["system", "kill"], ["agent"], ["agent", "start"], ["agent", "stop"], ["agent", "list"],
    ["run"], ["result"], ["ps"], ["kill"],
])
def test_help_everywhere(command: list[str]) -> None:
    done = CliRunner().invoke(cli, [*command, "--help"], prog_name="hayata")
    assert done.exit_code == 0, done.output
    assert done.output.startswith("Usage: hayata")


@pytest.mark.parametrize("entry", [[sys.executable, "-m", "hayata_py"],
                                   [str(Path(sys.executable).with_name("hayata"))]])
def test_module_and_console_script(entry: list[str]) -> None:
    if not Path(entry[0]).exists():
        pytest.skip("the console script is not installed (pip install -e .)")
    done = subprocess.run([*entry, "--help"], capture_output=True, text=True, timeout=30,
                          env=CLEAN_ENV, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: hayata") and "system" in done.stdout
