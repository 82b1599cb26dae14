"""What the observer reads and calls of the system it shows.

The page is served for an :class:`~hayata_py.AgentSystem`
(``AgentSystem.observe()`` serves it for itself), but its modules see the
system as :class:`ObservedSystem`, so they never import ``_api``, which imports
them: imports run one way (``_api`` -> ``_observer._server`` -> ``_system``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from hayata_py._ref_system import RefSystem
from hayata_py.store import TaskStore


class ObservedSystem(RefSystem, Protocol):
    """The part of an ``AgentSystem`` the page reads (and hands to ``AgentRef``)."""

    @property
    def store(self) -> TaskStore:
        """The durable store the page reads invocations and tasks from."""
        ...

    @property
    def data_dir(self) -> Path: ...

    @property
    def name(self) -> str: ...

    @property
    def admin_port(self) -> int: ...

    @property
    def session_id(self) -> int:
        """The OS session of every process of the system."""
        ...

    def processes(self) -> list[Any]:
        """Every live OS process of the system (psutil.Process objects)."""
        ...

    def agents(self) -> list[str]:
        """Ids of the started agents, in start order."""
        ...

    def tree(self, *, describe_timeout: float = ...) -> dict[str, Any]:
        """The live actor tree (nested dicts, as ``AgentSystem.tree()``)."""
        ...
