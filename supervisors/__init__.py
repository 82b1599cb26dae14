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
    ChildInfo,
    CountChildren,
    DeleteChild,
    GetPid,
    Reply,
    RestartChild,
    ShutdownSupervisor,
    StartChild,
    StopNormally,
    TerminateChild,
    WhichChildren,
)
from supervisors._spec import (
    BRUTAL_KILL,
    INFINITY,
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
from supervisors._system import SupervisorRef, System

__all__ = [
    "BRUTAL_KILL",
    "INFINITY",
    "ChildCounts",
    "ChildEvent",
    "ChildInfo",
    "ChildSpec",
    "CountChildren",
    "DeleteChild",
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
]
