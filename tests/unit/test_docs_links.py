"""Every relative link in the README points at a file of the repository
(the docs pages are checked by ``make docs --strict``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_links_point_at_existing_files() -> None:
    text = (ROOT / "README.md").read_text()
    targets = [t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)]
    local = [t for t in targets if t and "://" not in t and not t.startswith("mailto:")]
    assert local, "the README links into docs/"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == []
