"""What an :class:`~hayata_py.AgentRef` uses of the system it belongs to.

An ``AgentRef`` is made by an :class:`~hayata_py.AgentSystem` (``start_agent``,
``agent``) and asks through it. It sees the system as :class:`RefSystem`, so
``_ref`` never imports ``_api``, which imports it: imports run one way
(``_api`` -> ``_ref`` -> ``_ref_system``).
"""

from __future__ import annotations

from typing import Any, Protocol

from hayata_py._inbox import Inbox
from hayata_py._receiver import Receiver
from hayata_py.store import TaskStore
from supervisors import System


class RefSystem(Protocol):
    """The part of an ``AgentSystem`` its agent handles read and call."""

    @property
    def store(self) -> TaskStore | None:
        """The durable store (the one the system's agents record to)."""
        ...

    @property
    def admin_pid(self) -> int:
        """The pid of the actor system's admin process."""
        ...

    @property
    def _system(self) -> System:
        """This thread's endpoint to the actor system."""
        ...

    @property
    def _inbox(self) -> Inbox:
        """Where the results and events of ``hy.CALLER`` runs arrive."""
        ...

    def _caller_inbox(self) -> tuple[Inbox, Receiver]:
        """The inbox of ``hy.CALLER`` runs and the receiver that feeds it."""
        ...

    def _agent_address(self, agent_id: str, via: Any = None,
                       timeout: float = ...) -> tuple[Any, int | None]:
        """The agent actor's address and pid (None on another system)."""
        ...
