"""The ``hayata`` command line, driven as a user would: in subprocesses.

Every test that starts a system kills it in a ``finally`` (``system kill``),
so no process outlives the test even when an assertion fails. What the command
refuses or prints before any system is involved is checked in-process, in
``tests/unit/test_cli_usage.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisors._system import session_processes
from tests.helpers import alive, eventually, interruptible

ROOT = Path(__file__).resolve().parents[2]
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


def popen(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hayata_py", *args, "--data-dir",
                             str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env=CLEAN_ENV, preexec_fn=interruptible)


def concurrently(data_dir: Path, *commands: tuple[str, ...]
                 ) -> list[subprocess.CompletedProcess[str]]:
    """Run read-only commands at the same time (each costs ~0.7 s of imports)."""
    procs = [popen(data_dir, *args) for args in commands]
    done = []
    for proc, args in zip(procs, commands, strict=True):
        out, err = proc.communicate(timeout=30)
        done.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return done


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def record(data_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((data_dir / "system.json").read_text())
    return data


def session_pids(session_id: int) -> set[int]:
    return {p.pid for p in session_processes(session_id)}


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


# A whole drill: a dozen `hayata` processes, each a fresh interpreter (about 1 s
# each quiet, several under load); 60 s was too tight on a busy machine.
@pytest.mark.timeout(180)
def test_drill_start_run_ps_kill_node_crash_restart(data_dir: Path) -> None:
    """The acceptance drill, down to `tasks` and `result` read from the store after a restart."""
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
                      "status": "completed", "result": {"answer": "echo:hi"}, "error": None}

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
    first = result["invocation_id"]
    listed, tasks, stored, text = concurrently(
        data_dir, ("agent", "list"), ("tasks", "hello", "--invocation", first, "--json"),
        ("result", "hello", first, "--json"), ("tasks", "hello", "--invocation", first))
    assert listed.returncode == 0 and "hello" not in listed.stdout
    assert tasks.returncode == 0, tasks.stderr
    [task] = json_lines(tasks.stdout)
    assert task["invocation_id"] == first and task["node_id"] == "echo"
    assert (task["status"], task["classification"], task["attempt"]) == ("completed",
                                                                         "completed", 1)
    assert task["result"] == {"answer": "echo:hi"} and task["resolved"] is False
    assert stored.returncode == 0, stored.stderr
    assert json.loads(stored.stdout) == result
    assert f"invocation {first} of hello: completed" in text.stdout
    assert task["task_id"] in text.stdout


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
    killed = re.search(r"killed \d+ orphan process\(es\) \[([\d, ]+)\]", out)
    if killed:  # only processes of the dead session that were still alive
        assert {int(p) for p in killed.group(1).split(",")} <= survivors
    else:
        assert "no process of it was left" in out
    assert session_pids(old["session_id"]) == set()
    status = json.loads(ok(data_dir, "system", "status", "--json"))
    assert status["running"] and status["agents"] == []


# A whole drill: a dozen `hayata` processes, each a fresh interpreter (about 1 s
# each quiet, several under load); 60 s was too tight on a busy machine.
@pytest.mark.timeout(180)
def test_agent_commands_run_failures_and_detach(data_dir: Path, tmp_path: Path) -> None:
    ok(data_dir, "agent", "start", "tests.cli_fixtures:failing")
    ok(data_dir, "agent", "start", "tests.cli_fixtures:slow")  # a factory function
    listed = [json.loads(line) for line in ok(data_dir, "agent", "list", "--json").splitlines()]
    idle = {"running": 0, "paused": 0, "unfinished": 0, "max_invocations": 1}
    assert listed == [{"id": "failing", "status": "idle", "invocation": None,
                       "invocations": idle},
                      {"id": "slow", "status": "idle", "invocation": None,
                       "invocations": idle}]

    failed = hayata(data_dir, "run", "failing", "--json")
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["error"]["code"] == "node_failed"
    text = hayata(data_dir, "run", "failing")
    assert text.returncode == 1 and "node_failed" in text.stderr

    gate = tmp_path / "gate"
    run = subprocess.Popen(
        [sys.executable, "-m", "hayata_py", "run", "slow", "--input", json.dumps(str(gate)),
         "--stream", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=CLEAN_ENV,
        preexec_fn=interruptible)
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
    assert {"id": "slow", "status": "running", "invocation": invocation,
            "invocations": idle | {"running": 1}} in statuses
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


# A whole drill: a dozen `hayata` processes, each a fresh interpreter (about 1 s
# each quiet, several under load); 60 s was too tight on a busy machine.
@pytest.mark.timeout(180)
def test_recovery_drill_through_the_cli(data_dir: Path, tmp_path: Path) -> None:
    """Drill 1 and 2 (resolve) of VM_RECOVERY_TESTS.md: `right` in flight, the whole
    system killed, restarted; the store shows what survived; recover, resolve, recover."""
    ok(data_dir, "agent", "start", "examples.drills.graph:config")
    effects = tmp_path / "effects.log"
    spec = {"effects": str(effects), "gates": {"right": str(tmp_path / "gate-right")}}
    run = popen(data_dir, "run", "drill", "--input", json.dumps(spec), "--stream", "--json")
    try:
        assert run.stdout is not None
        seen = []
        while ("node_completed", "left") not in seen:
            event = json.loads(run.stdout.readline())
            seen.append((event["type"], event["data"].get("node_id")))
            inv = event["invocation_id"]
        # The node function writes "start" after its task was recorded started.
        eventually(lambda: " right " in effects.read_text(), message="right started")
        assert "killed" in ok(data_dir, "system", "kill")
        _out, err = run.communicate(timeout=20)
        # One message whichever check noticed first (tests/unit/test_cli_follow.py).
        assert run.returncode == 3 and f"the system died during invocation {inv}" in err, err
    finally:
        run.kill()
        run.wait()
    assert "cleaned up the dead system" in ok(data_dir, "system", "start")
    ok(data_dir, "agent", "start", "examples.drills.graph:config")

    listed, tasks, refused = concurrently(data_dir, ("agent", "list", "--json"),
                                          ("tasks", "drill", "--json"), ("recover", "drill"))
    [agent] = json_lines(listed.stdout)
    assert agent == {"id": "drill", "status": "recovery_required", "invocation": inv,
                     "invocations": {"running": 0, "paused": 0, "unfinished": 1,
                                     "max_invocations": 1}}
    rows = {row["node_id"]: row for row in json_lines(tasks.stdout)}
    assert {node: (row["status"], row["classification"]) for node, row in rows.items()} == {
        "fetch": ("completed", "completed"), "left": ("completed", "completed"),
        "right": ("started", "uncertain")}
    assert {row["invocation_id"] for row in rows.values()} == {inv}
    right = rows["right"]["task_id"]
    assert refused.returncode == 6 and "Traceback" not in refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "task_execution_uncertain" in line and right in line and "right" in line
    assert f"hayata resolve drill {right} --result" in line and f"abandon drill {inv}" in line
    assert ("start", "right") in [tuple(e.split()[0::2]) for e in
                                  effects.read_text().splitlines()]

    assert f"resolved task {right}" in ok(data_dir, "resolve", "drill", right, "--result",
                                          '{"right": "checked-by-hand"}')
    out = json_lines(ok(data_dir, "recover", "drill", "--stream", "--json"))
    events, final = out[:-1], out[-1]
    assert events[0]["type"] == "invocation_started" and events[0]["data"]["recovered"]
    # Numbered on from the first run's logged events (how many were logged
    # before the kill depends on timing: they wait up to 10 ms for their write).
    first = events[0]["sequence"]
    assert [e["sequence"] for e in events] == list(range(first, first + len(events)))
    assert [(e["type"], e["data"].get("node_id")) for e in events[1:]] == [
        ("node_started", "report"), ("node_completed", "report"),
        ("invocation_completed", None)]
    assert final["kind"] == "result" and final["ok"] and final["invocation_id"] == inv
    assert final["result"]["state"]["report"] == "report-done"
    runs = [tuple(e.split()[0::2]) for e in effects.read_text().splitlines()]
    assert runs.count(("start", "right")) == 1 and runs.count(("start", "fetch")) == 1
    assert runs.count(("start", "left")) == 1 and runs.count(("start", "report")) == 1


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


@pytest.mark.parametrize("entry", [[sys.executable, "-m", "hayata_py"],
                                   [str(Path(sys.executable).with_name("hayata"))]])
def test_module_and_console_script(entry: list[str]) -> None:
    if not Path(entry[0]).exists():
        pytest.skip("the console script is not installed (pip install -e .)")
    done = subprocess.run([*entry, "--help"], capture_output=True, text=True, timeout=30,
                          env=CLEAN_ENV, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: hayata") and "system" in done.stdout


# -- cluster options (issue 7) ------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_cluster_leader_and_member_place_a_node_on_the_member(tmp_path: Path,
                                                              pg_url: str) -> None:
    """A leader and a gpu member started through the CLI on loopback with one
    PostgreSQL store: the agent's node needing gpu runs on the member and `ps`
    marks it remote; when the member is killed the node waits for a host."""
    from supervisors._thespian import free_port

    leader, member = tmp_path / "leader", tmp_path / "member"
    port = free_port()
    timings = ("--heartbeat", "0.1", "--heartbeat-misses", "3", "--convention-period", "1",
               "--convention-misses", "2")
    try:
        out = ok(leader, "system", "start", "--admin-port", str(port), "--store", pg_url,
                 "--name", "leader", *timings)
        assert f"name leader, bound to 127.0.0.1, leads its convention (members join with " \
               f"--leader 127.0.0.1:{port})" in out
        started = hayata(member, "system", "start", "--leader", f"127.0.0.1:{port}",
                         "--store", pg_url, "--name", "gpu-1", "--capability", "gpu=true",
                         "--capability", "region=eu", *timings)
        assert started.returncode == 0, started.stderr
        assert started.stderr == ""  # loopback: no warning
        assert f"member of the convention led by 127.0.0.1:{port}" in started.stdout
        assert 'capabilities gpu=true region="eu"' in started.stdout

        assert "started agent placed" in ok(leader, "agent", "start", "tests.cli_fixtures:placed")
        status, text, rows = concurrently(
            member, ("system", "status", "--json"), ("system", "status"), ("ps", "--json"))
        info = json.loads(status.stdout)
        assert (info["name"], info["bind"], info["leader"]) == ("gpu-1", "127.0.0.1",
                                                                f"127.0.0.1:{port}")
        assert info["capabilities"] == {"gpu": True, "region": "eu"}
        assert info["liveness"] == {"heartbeat": 0.1, "heartbeat_misses": 3,
                                    "convention_period": 1.0, "convention_misses": 2}
        assert info["store_url"] == pg_url
        assert f"leader       127.0.0.1:{port}" in text.stdout
        assert 'capabilities gpu=true region="eu"' in text.stdout
        assert json.loads(rows.stdout)["children"] == []  # the member runs no agent itself

        agent_sup = find(tree(leader), "agent:placed")
        node = find(agent_sup, "nodes", "node:echo")
        assert node["remote"] is True and node["status"] == "running"
        assert node["pid"] in session_pids(record(member)["session_id"])
        assert find(agent_sup, "agent")["remote"] is False
        assert find(agent_sup, "agent")["pid"] in session_pids(record(leader)["session_id"])
        lines = ok(leader, "ps").splitlines()
        assert any("node node:echo" in line and line.endswith("(remote)") for line in lines)
        assert any("edge echo.edge-" in line and line.endswith("(remote)") for line in lines)
        assert not any("agent agent" in line and "(remote)" in line for line in lines)
        assert_one_line_error(hayata(leader, "kill", "placed", "--node", "echo"),
                              "runs on another system")
        assert '"answer":"echo:hi"' in ok(leader, "run", "placed", "--input", '"hi"')

        assert "killed" in ok(member, "system", "kill")

        def waiting() -> bool:
            row = find(tree(leader), "agent:placed", "nodes", "node:echo")
            return bool(row["status"] == "waiting_for_placement" and row["pid"] is None)

        eventually(waiting, timeout=30, interval=0.2, message="node waits for a gpu host")
        assert "waiting_for_placement" in ok(leader, "ps")
    finally:
        hayata(member, "system", "kill")
        hayata(leader, "system", "kill")


def test_run_exits_5_when_its_agent_dies_mid_run(data_dir: Path, tmp_path: Path) -> None:
    """Found by killing the agent under a waiting `hayata run` (an actor kill, not
    the whole system): the command waited for ever. It now exits 5 with the way on."""
    ok(data_dir, "agent", "start", "examples.drills.graph:config")
    effects, gate = tmp_path / "effects.log", tmp_path / "gate-right"
    spec = json.dumps({"effects": str(effects), "gates": {"right": str(gate)}})
    run = popen(data_dir, "run", "drill", "--input", spec)
    try:
        eventually(lambda: effects.exists() and " right " in effects.read_text(),
                   message="right started")
        assert "killed" in ok(data_dir, "kill", "drill", "--agent")
        _out, err = run.communicate(timeout=20)
        assert run.returncode == 5 and "hayata recover drill" in err, err
    finally:
        run.kill()
        run.wait()
    gate.touch()
    assert "completed" in ok(data_dir, "recover", "drill")
