"""The cluster example runs end to end (two systems in one convention on loopback)."""

from __future__ import annotations

import re

import pytest


def test_cluster_example(capfd: pytest.CaptureFixture[str]) -> None:
    from examples.cluster import main

    assert main() == 0
    # capfd: the systems started here write to this test's file descriptors, so
    # what their processes print (not only this one's) is seen.
    out, err = capfd.readouterr()
    assert "node embed runs on gpu-1: pid" in out and "(another system)" in out
    assert "event 6: invocation_completed" in out
    noticed = re.search(r"a noticed after ([0-9.]+) s: invocation_interrupted; "
                        r"agent status recovery_required", out)
    assert noticed is not None, out
    assert float(noticed.group(1)) < 5.0
    assert "recovered: ok=True result={'vectors': [[5.0], [4.0]]}" in out
    # Thespian's own lines (e.g. "Pending Actor create for ... failed" when gpu-1
    # dies) go to the systems' logs, not to the terminal.
    assert err == "", err
