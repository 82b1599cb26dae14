"""The cluster example runs end to end (two systems in one convention on loopback)."""

from __future__ import annotations

import re

import pytest


def test_cluster_example(capsys: pytest.CaptureFixture[str]) -> None:
    from examples.cluster import main

    assert main() == 0
    out = capsys.readouterr().out
    assert "node embed runs on gpu-1: pid" in out and "(another system)" in out
    assert "event 6: invocation_completed" in out
    noticed = re.search(r"a noticed after ([0-9.]+) s: invocation_interrupted; "
                        r"agent status recovery_required", out)
    assert noticed is not None, out
    assert float(noticed.group(1)) < 5.0
    assert "recovered: ok=True result={'vectors': [[5.0], [4.0]]}" in out
