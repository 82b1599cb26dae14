"""The agent system the differential modules share (one per module): its
nodes count their runs under ``LGCOMPAT_DIR``, put back when the module ends.
A module that needs another system defines its own ``system`` fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import hayata_py as hy


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[hy.AgentSystem]:
    folder = tmp_path_factory.mktemp("lgcompat")
    old = os.environ.get("LGCOMPAT_DIR")
    os.environ["LGCOMPAT_DIR"] = str(folder / "counts")
    (folder / "counts").mkdir()
    try:
        with hy.AgentSystem(folder / "data") as agents:
            yield agents
    finally:
        if old is None:
            os.environ.pop("LGCOMPAT_DIR", None)
        else:
            os.environ["LGCOMPAT_DIR"] = old
