"""Why an invocation fails or is interrupted: the errors the machine ends with.

Each has a stable ``code`` (docs/guide/failure-codes.md lists them) and ``details`` with the
facts a program reacts to; the message is for people.
"""

from __future__ import annotations

from collections.abc import Sequence

from hayata_py._errors import EncodingError, ErrorInfo


def policy_failed(type_name: str, message: str, step: int) -> ErrorInfo:
    return ErrorInfo("policy_failed", f"{type_name}: {message}",
                     {"type": type_name, "step": step})


def not_storable(what: str, exc: EncodingError) -> ErrorInfo:
    """A Finish result or Next input that the store cannot encode."""
    return ErrorInfo("invalid_policy_result", f"{what} cannot be stored: {exc}", exc.details)


def max_steps_exceeded(step: int, max_steps: int) -> ErrorInfo:
    return ErrorInfo("max_steps_exceeded", f"the policy asked for step {step + 1} but "
                     f"max_steps is {max_steps}", {"max_steps": max_steps})


def unplaced(node_id: str, reason: str) -> ErrorInfo:
    return ErrorInfo(
        "invocation_interrupted",
        f"node {node_id!r} has no system to run on ({reason}); the invocation is kept: "
        "call recover() once a system that satisfies the node's placement has joined",
        {"node_id": node_id, "reason": reason, "recoverable": True})


def unreachable(node_id: str, execution_id: str, reason: str) -> ErrorInfo:
    return ErrorInfo(
        "invocation_interrupted",
        f"node {node_id!r} became unreachable during execution {execution_id} "
        f"({reason}); the invocation is kept: call recover() once a system that "
        "satisfies the node's placement is up",
        {"node_id": node_id, "reason": reason, "recoverable": True})


def node_crashed(node_id: str, pid: int | None, execution_id: str, reason: str
                 ) -> ErrorInfo:
    return ErrorInfo(
        "node_crashed", f"node {node_id!r} (pid {pid}) died during execution "
        f"{execution_id}: {reason}", {"node_id": node_id, "pid": pid, "reason": reason})


def timed_out(pending: Sequence[str], timeout: float, execution_id: str) -> ErrorInfo:
    return ErrorInfo(
        "execution_timeout", f"node {pending[0]!r} did not finish within {timeout}s "
        f"(execution {execution_id}; pending nodes: {', '.join(pending)}); its edge is "
        "killed", {"node_id": pending[0], "pending_nodes": list(pending), "timeout": timeout})


def nodes_lost() -> ErrorInfo:
    return ErrorInfo("invocation_interrupted", "the agent's node supervisor died and the "
                     "agent restarts with it; the invocation is kept: call recover()",
                     {"recoverable": True})


def agent_stopped() -> ErrorInfo:
    return ErrorInfo("agent_stopped", "the agent was stopped during the invocation", {})


def cancelled(step: int, task_ids: Sequence[str]) -> ErrorInfo:
    """``cancel()`` stopped the invocation in step ``step``; ``task_ids`` are the
    tasks it stopped (recorded ``cancelled``)."""
    return ErrorInfo("cancelled", f"the invocation was cancelled in step {step}; its "
                     "completed tasks are kept", {"step": step, "tasks": list(task_ids)})


def refused(error: ErrorInfo, what: str) -> ErrorInfo:
    """A write the store refused (not fenced): ``what`` was not recorded."""
    return ErrorInfo(error.code, f"{what}: {error.message}", dict(error.details))


def task_record_refused(error: ErrorInfo) -> ErrorInfo:
    """An edge could not record its task's start or result (the store refused the
    write, not fenced): the run is interrupted, the invocation kept for recover()."""
    return ErrorInfo(error.code, f"a task record could not be written: {error.message}",
                     {**error.details, "recoverable": True})


def ownership_lost(invocation_id: str, owner: str) -> ErrorInfo:
    return ErrorInfo(
        "ownership_lost", f"another system took over invocation {invocation_id} (this "
        "system's lease was not renewed in time): this system stops it and writes "
        "nothing more", {"owner": owner, "recoverable": True})
