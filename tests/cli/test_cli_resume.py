"""`hayata resume` and the paused column of `hayata agent list`, through the CLI
(drill 8 of VM_RECOVERY_TESTS.md, without the crash: tests/runtime/test_pauses.py has it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, hayata, ok

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    try:
        ok(path, "system", "start")
        yield path
    finally:
        hayata(path, "system", "kill")


def test_resume_a_paused_invocation_from_the_shell(data_dir: Path, tmp_path: Path) -> None:
    effects = tmp_path / "effects.log"
    ok(data_dir, "agent", "start", "examples.drills.hitl:pause_config")
    paused = hayata(data_dir, "run", "hitl-drill", "--json", "--input",
                    json.dumps({"effects": str(effects)}))
    assert paused.returncode == 5, paused
    result = json.loads(paused.stdout.splitlines()[-1])
    assert result["status"] == "paused"
    inv = result["invocation_id"]
    (listed,) = [json.loads(line) for line in ok(data_dir, "agent", "list", "--json").splitlines()]
    assert listed == {"id": "hitl-drill", "status": "paused", "invocation": inv,
                      "invocations": {"running": 0, "paused": 1, "unfinished": 1,
                                      "max_invocations": 1},
                      "paused": {"kind": "before", "payload": {"pause_before": ["charge"]},
                                 "nodes": ["charge"]}}
    assert "paused" in ok(data_dir, "agent", "list")
    ok(data_dir, "agent", "stop", "hitl-drill")
    told = hayata(data_dir, "result", "hitl-drill", inv)
    assert told.returncode == 5  # unfinished, and paused: resume, not recover
    assert f"hayata resume hitl-drill {inv} --value JSON" in told.stderr, told.stderr
    assert "hayata recover" not in told.stderr
    ok(data_dir, "agent", "start", "examples.drills.hitl:pause_config")
    assert_one_line_error(hayata(data_dir, "resume", "hitl-drill", inv, "--value", "{nope"),
                          "--value")
    done = ok(data_dir, "resume", "hitl-drill", inv, "--value", '{"approved_by": "ann"}',
              "--stream", "--json")
    lines = [json.loads(line) for line in done.splitlines()]
    assert lines[-1]["status"] == "completed" and lines[-1]["ok"]
    assert lines[0]["type"] == "invocation_started"
    ended = hayata(data_dir, "resume", "hitl-drill", inv)
    assert ended.returncode == 1
    assert_one_line_error(ended, "not_paused")
    unknown = hayata(data_dir, "resume", "hitl-drill", "no-such-invocation")
    assert unknown.returncode == 4  # like every other not-found
    assert_one_line_error(unknown, "no-such-invocation", "not_found")
    starts = [line.split()[1] for line in effects.read_text().splitlines()
              if line.startswith("start")]
    assert starts == ["fetch", "charge", "report"]
