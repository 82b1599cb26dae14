"""``supervisors`` is usable alone: a fresh interpreter that imports it has no
module of ``hayata_py`` (the rest of the layering, read from the sources, is
pinned in ``tests/unit/test_exports.py``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)


def test_supervisors_does_not_import_hayata() -> None:
    code = "import sys, supervisors; assert 'hayata_py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
