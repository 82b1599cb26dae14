"""The ``hayata`` command line in-process (click's runner), where nothing starts:
help, the options and commands refused before any system is looked for or
started, ``hayata logs`` over a written log, and the exit status of a result.
Driven as a user would, in subprocesses against real systems:
``tests/cli/test_cli.py``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hayata_py.cli import cli
from tests.cli.test_cli import assert_one_line_error

pytestmark = pytest.mark.timeout(60)


# Refused before anything is imported or connected: checked in-process (fast).
RECOVERY_ERRORS = [
    (("tasks", "hello"), ("no hayata system is running", "hayata system start")),
    (("recover", "hello"), ("no hayata system is running",)),
    (("resolve", "hello", "task-x", "--result", "{nope"), ("--result is not valid JSON",)),
    (("resolve", "hello", "task-x", "--result", "[1]"), ("must be a JSON object",)),
    (("abandon", "hello", "inv"), ("no hayata system is running",)),
]


@pytest.mark.parametrize(("args", "words"), RECOVERY_ERRORS)
def test_recovery_command_errors(tmp_path: Path, args: tuple[str, ...],
                                 words: tuple[str, ...]) -> None:
    done = CliRunner().invoke(cli, [*args, "--data-dir", str(tmp_path / "none")],
                              prog_name="hayata")
    assert isinstance(done.exception, SystemExit), done.exception
    assert_one_line_error(subprocess.CompletedProcess(args, done.exit_code, done.stdout,
                                                      done.stderr), *words)


@pytest.mark.parametrize("command", [
    [], ["system"], ["system", "start"], ["system", "status"], ["system", "stop"],
    ["system", "kill"], ["agent"], ["agent", "start"], ["agent", "stop"], ["agent", "list"],
    ["run"], ["result"], ["ps"], ["kill"], ["tasks"], ["recover"], ["resolve"], ["abandon"],
    ["logs"],
])
def test_help_everywhere(command: list[str]) -> None:
    done = CliRunner().invoke(cli, [*command, "--help"], prog_name="hayata")
    assert done.exit_code == 0, done.output
    assert done.output.startswith("Usage: hayata")


def test_logs_renders_filters_and_limits(tmp_path: Path) -> None:
    rows = [
        {"event": "child_started", "level": "info", "agent_id": "a", "pid": 1,
         "timestamp": "2026-01-01T00:00:00Z"},
        {"event": "actor_crashed", "level": "warning", "agent_id": "b", "pid": 2,
         "reason": "RuntimeError: x", "timestamp": "2026-01-01T00:00:01Z"},
        {"event": "node_down", "level": "info", "agent_id": "b", "pid": 3,
         "timestamp": "2026-01-01T00:00:02Z"},
    ]
    (tmp_path / "hayata.log.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"half a li')
    run = CliRunner().invoke(cli, ["logs", "--data-dir", str(tmp_path), "--agent", "b"])
    assert run.exit_code == 0, run.output
    lines = run.output.splitlines()
    assert len(lines) == 2 and "actor_crashed" in lines[0] and "node_down" in lines[1]
    assert "reason='RuntimeError: x'" in lines[0] or "reason=RuntimeError: x" in lines[0]
    warn = CliRunner().invoke(cli, ["logs", "--data-dir", str(tmp_path), "--level", "warning",
                                    "--json"])
    assert [json.loads(line)["event"] for line in warn.output.splitlines()] == ["actor_crashed"]
    last = CliRunner().invoke(cli, ["logs", "--data-dir", str(tmp_path), "-n", "1"])
    assert "node_down" in last.output and "child_started" not in last.output
    missing = CliRunner().invoke(cli, ["logs", "--data-dir", str(tmp_path / "none")])
    assert missing.exit_code == 4 and "Traceback" not in missing.output


START_ERRORS = [
    (("--leader", "10.0.0.1"), ("--leader must be HOST:PORT", "10.0.0.1:1900")),
    (("--leader", "h:70000"), ("--leader must be HOST:PORT",)),
    (("--bind", "somehost"), ("--bind must be an IPv4 address", "10.0.0.2")),
    (("--bind", "0.0.0.0"), ("--bind must be the one address", "not 0.0.0.0")),
    (("--capability", "gpu"), ("--capability must be KEY=VALUE", "gpu=true")),
    (("--capability", "x=[1]"), ("--capability x: VALUE must be a string, a finite number",)),
    (("--capability", "a=1", "--capability", "a=2"), ("--capability a is given twice",)),
    (("--heartbeat", "fast"), ("--heartbeat must be a number of seconds", "0.5")),
    (("--heartbeat", "0"), ("--heartbeat must be seconds between", "--heartbeat 0.5")),
    (("--heartbeat-misses", "0"), ("--heartbeat-misses must be an int >= 1",)),
    (("--convention-period", "0.5"), ("--convention-period must be seconds between 1.0",)),
    (("--convention-misses", "two"), ("--convention-misses must be a whole number",)),
    (("--store", "mysql://u:secret@h/db"), ("--store must be a PostgreSQL or SQLite URL",
                                            "u:***@h")),
    (("--name", " "), ("--name must not be empty",)),
]


@pytest.mark.parametrize(("args", "words"), START_ERRORS)
def test_system_start_option_errors(tmp_path: Path, args: tuple[str, ...],
                                    words: tuple[str, ...]) -> None:
    """Refused before anything starts (checked in-process): one line naming the option."""
    data_dir = tmp_path / "none"
    done = CliRunner().invoke(cli, ["system", "start", *args, "--data-dir", str(data_dir)],
                              prog_name="hayata")
    assert isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code == 2
    assert_one_line_error(subprocess.CompletedProcess(args, done.exit_code, done.stdout,
                                                      done.stderr), *words)
    assert "secret" not in done.stderr
    assert not data_dir.exists()


def test_capabilities_are_json_when_they_parse() -> None:
    from hayata_py.cli.system import _parse_capabilities

    assert _parse_capabilities(("gpu=true", "cores=8", "ratio=1.5", "region=eu",
                                'tag="7"', "key=a=b")) == {
        "gpu": True, "cores": 8, "ratio": 1.5, "region": "eu", "tag": "7", "key": "a=b"}


def test_a_record_of_an_older_version_loads_with_defaults(tmp_path: Path) -> None:
    from hayata_py import _datadir

    # Any session but this process's own (a record naming our own is refused).
    other_session = max(os.getsid(0), 1) + 1  # > 1 and not ours (CI may run in session 0)
    old = {"data_dir": str(tmp_path), "admin_port": 1900, "admin_pid": 1, "admin_started": 0.0,
           "session_id": other_session, "store_url": None, "log_file": "l",
           "output_file": "o", "cwd": "/", "started_at": 0.0, "version": 1, "instance": "i",
           "added_later": True}
    (tmp_path / "system.json").write_text(json.dumps(old))
    loaded = _datadir.load(tmp_path)
    assert loaded is not None and loaded.admin_port == 1900
    assert (loaded.name, loaded.bind, loaded.leader, loaded.capabilities) == (
        "", "127.0.0.1", None, {})


def hy_result(ok: bool, error: tuple[str, dict[str, Any]] | None, status: str) -> Any:
    from hayata_py._errors import ErrorInfo
    from hayata_py.messages import AgentResult

    info = None if error is None else ErrorInfo(error[0], "why", error[1])
    return AgentResult("inv-1", ok, {"x": 1} if ok else None, info, status=status)


RESULTS = [  # (result, exit status): the same with and without --json
    (hy_result(True, None, ""), 0),
    (hy_result(False, ("node_failed", {}), ""), 1),
    (hy_result(False, ("invocation_interrupted", {"recoverable": True}), "interrupted"), 5),
    (hy_result(False, ("invocation_paused", {"payload": {"ask": 1}}), "paused"), 5),
]


@pytest.mark.parametrize(("result", "status"), RESULTS)
@pytest.mark.parametrize("as_json", [False, True])
def test_the_exit_status_of_a_result_does_not_depend_on_json(
        result: Any, status: int, as_json: bool) -> None:
    # Regression: with --json an interrupted run (kept for recover) exited 1.
    from hayata_py.cli.run import print_result

    assert print_result(result, as_json) == status
