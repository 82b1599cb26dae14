"""OTP-style supervision for Thespian actors (usable without hayata_py).

See ``docs/design.md`` and the docstrings of :class:`Supervisor`,
:class:`ChildSpec` and :class:`SupervisorFlags` for the semantics.
"""

from supervisors._actor import SupervisedActor
from supervisors._errors import InvalidSpec, StartFailed, SupervisorError
from supervisors._intensity import add_restart
from supervisors._messages import (
    ChildCounts,
    ChildEvent,
    ChildEventKind,
    ChildInfo,
    CountChildren,
    DeleteChild,
    ExitKind,
    Reply,
    RestartChild,
    ShutdownSupervisor,
    StartChild,
    TerminateChild,
    WhichChildren,
)
from supervisors._os import host_id, kill_child_process, process_alive
from supervisors._protocol import GetPid, StopNormally
from supervisors._ref import SupervisorRef
from supervisors._sessions import wait_gone
from supervisors._spec import (
    BRUTAL_KILL,
    INFINITY,
    AutoShutdown,
    ChildSpec,
    Kind,
    Restart,
    Shutdown,
    Sibling,
    Start,
    Strategy,
    SupervisorFlags,
)
from supervisors._supervisor import Supervisor
from supervisors._system import System

__all__ = [
    "BRUTAL_KILL",
    "INFINITY",
    "AutoShutdown",
    "ChildCounts",
    "ChildEvent",
    "ChildEventKind",
    "ChildInfo",
    "ChildSpec",
    "CountChildren",
    "DeleteChild",
    "ExitKind",
    "GetPid",
    "InvalidSpec",
    "Kind",
    "Reply",
    "Restart",
    "RestartChild",
    "Shutdown",
    "ShutdownSupervisor",
    "Sibling",
    "Start",
    "StartChild",
    "StartFailed",
    "StopNormally",
    "Strategy",
    "SupervisedActor",
    "Supervisor",
    "SupervisorError",
    "SupervisorFlags",
    "SupervisorRef",
    "System",
    "TerminateChild",
    "WhichChildren",
    "add_restart",
    "host_id",
    "kill_child_process",
    "process_alive",
    "wait_gone",
]
