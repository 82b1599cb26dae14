"""Helpers for store tests: sample records, raw SQL, child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from hayata_py.store import ActiveExecution, InvocationRecord, TaskRecord, task_id_for

REPO = Path(__file__).resolve().parents[2]


def invocation(
    invocation_id: str = "inv-1", agent_id: str = "agent-1", **changes: Any
) -> InvocationRecord:
    """A running invocation record with a little of everything."""
    fields: dict[str, Any] = {
        "invocation_id": invocation_id,
        "agent_id": agent_id,
        "status": "running",
        "step": 0,
        "state": {"customer": {"name": "Ada", "tags": ["a", "b"]}, "n": 1},
        "input": {"question": "hi", "blob": b"\x00\x01"},
        "active_execution": ActiveExecution("ex-0", 0, ("a", "b"), {"x": 1}, True),
        "parallel_results": [None, {"b": 2}],
        "last_result": {"answer": 42},
    }
    fields.update(changes)
    return InvocationRecord(**fields)


def task(
    node_id: str = "a",
    *,
    invocation_id: str = "inv-1",
    step: int = 0,
    branch: int = 0,
    execution_id: str = "ex-0",
    input: Any = None,
) -> TaskRecord:
    """A scheduled task record with its stable id."""
    return TaskRecord(
        task_id=task_id_for(invocation_id, step, node_id),
        invocation_id=invocation_id,
        execution_id=execution_id,
        step=step,
        node_id=node_id,
        branch_index=branch,
        input={"node": node_id} if input is None else input,
    )


def raw_execute(url: str, sql: str, **params: Any) -> list[Any]:
    """Run one SQL statement on ``url`` in its own engine; return rows if any."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(sql), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


def python_code(code: str) -> str:
    return textwrap.dedent(code)


def run_child(code: str, *args: str, timeout: float = 60.0) -> str:
    """Run ``code`` in a fresh interpreter with ``args``; return stdout, fail on error."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", python_code(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, f"child failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def start_child(code: str, *args: str) -> subprocess.Popen[str]:
    """Start ``code`` in a fresh interpreter without waiting."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-W", "error", "-c", python_code(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
