"""``SupervisorRef``: blocking control of one supervisor from outside the actor system."""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections.abc import Sequence
from typing import Any, Protocol

from thespian.actors import PoisonMessage

from supervisors._errors import SupervisorError
from supervisors._messages import (
    ChildCounts,
    ChildInfo,
    CountChildren,
    DeleteChild,
    Reply,
    RestartChild,
    ShutdownSupervisor,
    StartChild,
    TerminateChild,
    WhichChildren,
)
from supervisors._protocol import GetPid
from supervisors._spec import ChildSpec

DEFAULT_TIMEOUT = 30.0

_REFS = itertools.count(random.randrange(1, 2**31))
"""Request references: unique within this process (random start: several processes)."""


class Endpoint(Protocol):
    """What a ref talks through: a :class:`System`, or one of its endpoints."""

    def ask(self, address: Any, message: Any, timeout: float) -> Any: ...

    def listen(self, timeout: float) -> Any: ...


class SupervisorRef:
    """Blocking control of one supervisor from outside the actor system.

    Each call sends a request message and waits for the :class:`Reply`;
    errors come back as :class:`SupervisorError` with a stable ``code``.
    Children are referred to by id: a restarted child has a new address and
    pid, so look them up again with :meth:`which_children`.
    """

    def __init__(self, system: Endpoint, address: Any, supervisor_id: str, pid: int) -> None:
        self.system = system
        self.address = address
        self.id = supervisor_id
        self._pid = pid

    @property
    def pid(self) -> int:
        """The supervisor's OS pid. A ref made from an address alone (``pid``
        0, e.g. found with ``System.lookup``) asks the supervisor once (0 if it
        does not answer)."""
        if not self._pid:
            self._pid = self._ask_pid(5.0)
        return self._pid

    def _ask_pid(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        answer = self.system.ask(self.address, GetPid(), timeout)
        # Skip a late Reply to an earlier call that timed out.
        while answer is not None and not (isinstance(answer, int)
                                          and not isinstance(answer, bool)):
            remaining = deadline - time.monotonic()
            answer = self.system.listen(remaining) if remaining > 0 else None
        return answer or 0

    def _call(self, request: Any, timeout: float) -> Any:
        """Send ``request`` with a fresh ``ref`` and wait for the :class:`Reply`
        carrying it; anything else (a late reply to an earlier call that timed
        out) is dropped, so it can never be taken for this call's answer."""
        ref = next(_REFS)
        request = dataclasses.replace(request, ref=ref)
        deadline = time.monotonic() + timeout
        reply = self.system.ask(self.address, request, timeout)
        while reply is not None and not (isinstance(reply, Reply) and reply.ref == ref):
            if isinstance(reply, PoisonMessage) and getattr(reply, "poisonMessage", None) \
                    == request:
                raise SupervisorError(f"{type(request).__name__} could not be delivered",
                                      code="no_reply")
            remaining = deadline - time.monotonic()
            reply = self.system.listen(remaining) if remaining > 0 else None
        if reply is None:
            raise SupervisorError(
                f"no reply from supervisor {self.id!r} to {type(request).__name__} "
                f"within {timeout}s", code="timeout")
        if reply.ok:
            return reply.value
        assert reply.error is not None
        raise reply.error

    def which_children(self, timeout: float = DEFAULT_TIMEOUT) -> list[ChildInfo]:
        return list(self._call(WhichChildren(), timeout))

    def count_children(self, timeout: float = DEFAULT_TIMEOUT) -> ChildCounts:
        result: ChildCounts = self._call(CountChildren(), timeout)
        return result

    def start_child(
        self, spec_or_args: ChildSpec | Sequence[Any] = (), timeout: float = DEFAULT_TIMEOUT
    ) -> ChildInfo:
        """A ChildSpec for a static supervisor, or the extra args for simple_one_for_one."""
        request = (
            StartChild(spec=spec_or_args)
            if isinstance(spec_or_args, ChildSpec)
            else StartChild(args=tuple(spec_or_args))
        )
        result: ChildInfo = self._call(request, timeout)
        return result

    def terminate_child(self, child_id: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._call(TerminateChild(child_id), timeout)

    def restart_child(self, child_id: str, timeout: float = DEFAULT_TIMEOUT) -> ChildInfo:
        result: ChildInfo = self._call(RestartChild(child_id), timeout)
        return result

    def delete_child(self, child_id: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._call(DeleteChild(child_id), timeout)

    def child(self, child_id: str, timeout: float = DEFAULT_TIMEOUT) -> ChildInfo:
        for info in self.which_children(timeout):
            if info.id == child_id:
                return info
        raise SupervisorError(f"no child with id {child_id!r}", code="not_found",
                              child_id=child_id)

    def shutdown(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Stop the children right to left, then the supervisor."""
        self._call(ShutdownSupervisor(), timeout)
