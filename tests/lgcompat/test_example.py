"""examples/langgraph_chat.py runs offline as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)


def test_example_chat_runs() -> None:
    """examples/langgraph_chat.py: an approval interrupt(), then the tool and the answer."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "examples/langgraph_chat.py"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "approve_tool_call" in done.stdout
    assert "answer: It is sunny in Paris." in done.stdout

