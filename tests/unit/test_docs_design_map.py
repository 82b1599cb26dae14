"""docs/design.md's file map names every module of ``hayata_py`` and
``supervisors``, and only modules that exist (pure: reads files, starts nothing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(10)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hayata_py", "supervisors")
ROW = re.compile(r"^\|\s*`((?:hayata_py|supervisors)/[\w/]+\.py)`\s*\|", re.MULTILINE)


def file_map(text: str) -> list[str]:
    """The modules the rows of the "File map" section name, in order."""
    section = text.split("\n## File map\n", 1)[1].split("\n## ", 1)[0]
    return ROW.findall(section)


def modules() -> set[str]:
    return {path.relative_to(ROOT).as_posix()
            for package in PACKAGES for path in (ROOT / package).rglob("*.py")
            if "__pycache__" not in path.parts}


def test_the_file_map_reads_rows_and_only_rows() -> None:
    text = ("# Design\n\n## File map\n\n| file | what |\n|---|---|\n"
            "| `hayata_py/_api.py` | the system. See `supervisors/_rules.py`. |\n"
            "| `supervisors/_os.py` | OS facts. |\n\n## Next\n\n| `hayata_py/_ref.py` | x |\n")
    assert file_map(text) == ["hayata_py/_api.py", "supervisors/_os.py"]


def test_every_module_is_in_the_design_file_map_and_every_entry_exists() -> None:
    listed = file_map((ROOT / "docs" / "design.md").read_text())
    present = modules()
    assert sorted(present - set(listed)) == [], "modules missing from docs/design.md's file map"
    assert sorted(set(listed) - present) == [], "docs/design.md's file map names missing modules"
    assert sorted(m for m in set(listed) if listed.count(m) > 1) == [], "listed twice"
