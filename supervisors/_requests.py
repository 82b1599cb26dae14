"""The control requests a supervisor answers: start, terminate, restart and
delete a child (``which_children`` and ``count_children`` are answered from
the child table at once)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from supervisors._children import Child, Restarting, Waiting
from supervisors._errors import StartFailed, SupervisorError
from supervisors._lifecycle import Op, Predicate
from supervisors._messages import (
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
from supervisors._remote import RemoteWatch
from supervisors._spec import check_significant

_REQUESTS = (WhichChildren, CountChildren, StartChild, TerminateChild, RestartChild,
             DeleteChild, ShutdownSupervisor)


class ControlRequests(RemoteWatch):
    """The request operations of the supervisor actor; each raises a
    :class:`SupervisorError` that :meth:`_op_request` sends back."""

    def _refuse(self, message: Any, sender: Any) -> None:
        """Answer a control request that arrives while the supervisor shuts down."""
        if isinstance(message, _REQUESTS):
            self.send(sender, Reply(False, error=SupervisorError(
                f"supervisor {self.sup_id!r} is shutting down", code="shutting_down"),
                ref=message.ref))

    _pending_request: tuple[Any, int] | None = None
    """The caller of the request operation now running (answered if it is abandoned)."""

    def _op_request(self, sender: Any, ref: int, op: Op) -> Op:
        self._pending_request = (sender, ref)
        try:
            value = yield from op
        except SupervisorError as exc:
            self._pending_request = None
            self.send(sender, Reply(False, error=exc, ref=ref))
            return
        self._pending_request = None
        self.send(sender, Reply(True, value, ref=ref))

    def _abandon_request(self) -> None:
        """The running operation is dropped (the supervisor shuts down): answer its caller."""
        pending, self._pending_request = self._pending_request, None
        if pending is not None and self._op is not None:
            self.send(pending[0], Reply(False, error=SupervisorError(
                f"supervisor {self.sup_id!r} is shutting down", code="shutting_down"),
                ref=pending[1]))

    def _by_id(self, child_id: str) -> Child:
        child = self.children.by_id(child_id)
        if child is None:
            raise SupervisorError(f"no child with id {child_id!r}", code="not_found",
                                  child_id=child_id)
        return child

    def _op_start_request(self, request: StartChild) -> Generator[Predicate, Any, ChildInfo]:
        if self.children.dynamic and request.spec is not None:
            raise SupervisorError("a simple_one_for_one supervisor starts children of its "
                                  "template: pass the extra start args, not a ChildSpec",
                                  code="invalid_spec")
        if self.children.dynamic:
            child = self.children.new_dynamic(tuple(request.args))
        else:
            if request.spec is None:
                raise SupervisorError("start_child needs a ChildSpec", code="invalid_spec")
            check_significant(self.flags, request.spec)
            existing = self.children.by_id(request.spec.id)
            if existing is not None:
                code = "running" if existing.proc is not None else "already_present"
                raise SupervisorError(f"child {request.spec.id!r} is {code}", code=code,
                                      child_id=request.spec.id)
            child = Child(request.spec)
        self.children.add(child)
        error = yield from self._start_child(child)
        if error is not None:
            self.children.remove(child)
            raise StartFailed(f"child {child.spec.id!r} failed to start: {error.reason}",
                              child_id=child.spec.id, reason=error.reason)
        return child.info()

    def _op_terminate(self, child_id: str) -> Op:
        child = self._by_id(child_id)
        yield from self._stop_child(child)
        self.children.forget(child)

    def _op_restart_request(self, child_id: str) -> Generator[Predicate, Any, ChildInfo]:
        child = self._by_id(child_id)
        if self.children.dynamic:
            raise SupervisorError("simple_one_for_one children cannot be restarted by id",
                                  code="not_supported")
        if isinstance(child.state, (Restarting, Waiting)):
            raise SupervisorError(f"child {child_id!r} is restarting", code="restarting",
                                  child_id=child_id)
        if child.proc is not None:
            raise SupervisorError(f"child {child_id!r} is running", code="running",
                                  child_id=child_id)
        error = yield from self._start_child(child)
        if error is not None:
            raise StartFailed(f"child {child_id!r} failed to start: {error.reason}",
                              child_id=child_id, reason=error.reason)
        return child.info()

    def _delete(self, child_id: str) -> Reply:
        try:
            child = self._by_id(child_id)
        except SupervisorError as exc:
            return Reply(False, error=exc)
        if self.children.dynamic:
            return Reply(False, error=SupervisorError(
                "simple_one_for_one children cannot be deleted", code="not_supported"))
        if isinstance(child.state, (Restarting, Waiting)):
            return Reply(False, error=SupervisorError(
                f"child {child_id!r} is restarting", code="restarting", child_id=child_id))
        if child.proc is not None:
            return Reply(False, error=SupervisorError(
                f"child {child_id!r} is running", code="running", child_id=child_id))
        self.children.remove(child)
        return Reply(True, None)
