"""The SQL store's classes line up with the contract's sections: each section
of :class:`TaskStore` (``# -- name --`` in ``store/_contract.py``) is
implemented by one class of ``store/_sql/``, and no section class re-declares
the state the shared base owns."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from hayata_py.store import _contract
from hayata_py.store._contract import TaskStore
from hayata_py.store._sql.base import SqlBase
from hayata_py.store._sql.cache import NodeCache
from hayata_py.store._sql.events import EventLog
from hayata_py.store._sql.invocations import Invocations
from hayata_py.store._sql.leases import Leases
from hayata_py.store._sql.store import SqlTaskStore
from hayata_py.store._sql.tasks import TaskRecords
from hayata_py.store._sql.threads import Threads

pytestmark = pytest.mark.timeout(30)

SECTIONS: dict[str, type] = {
    "invocations": Invocations,
    "invocations: group commit": Invocations,
    "invocations: retention": Invocations,
    "ownership: claims and leases": Leases,
    "threads": Threads,
    "task records": TaskRecords,
    "node result cache (``AgentConfig.cache``)": NodeCache,
    "event log": EventLog,
    "lifecycle": SqlBase,
}


def contract_sections() -> dict[str, str]:
    """Method name -> the section of the contract it is declared in."""
    source = Path(inspect.getfile(_contract)).read_text()
    lines = source.splitlines()
    (cls,) = [node for node in ast.parse(source).body
              if isinstance(node, ast.ClassDef) and node.name == "TaskStore"]
    out = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            headers = [line.strip() for line in lines[cls.lineno:first - 1]
                       if line.strip().startswith("# -- ")]
            out[node.name] = headers[-1].removeprefix("# -- ").rstrip("- ").strip()
    return out


def test_every_section_has_its_class() -> None:
    sections = contract_sections()
    assert set(sections.values()) == set(SECTIONS)
    for name, section in sections.items():
        owners = [c for c in SqlTaskStore.__mro__ if c is not TaskStore and name in vars(c)]
        if not owners:  # not overridden: the contract's own (context manager) method
            assert name in ("__enter__", "__exit__"), name
            continue
        assert owners == [SECTIONS[section]], (name, section, owners)


def test_section_classes_declare_no_shared_state() -> None:
    for cls in {*SECTIONS.values(), SqlTaskStore} - {SqlBase}:
        assert issubclass(cls, SqlBase)
        assert vars(cls).get("__annotations__", {}) == {}, cls
        assert "__init__" not in vars(cls), cls
