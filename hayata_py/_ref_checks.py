"""The checks and answers of :class:`~hayata_py._ref.AgentRef`'s calls (pure but
for :func:`alive`): arguments checked before anything is sent, and the errors
a wait's answer stands for."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from hayata_py._actors.agent import validate_run
from hayata_py._codec import check_encodable
from hayata_py._errors import ConfigError, EncodingError, HayataError, RunRejected
from hayata_py._ref_system import RefSystem
from hayata_py.messages import AgentResult, ResultReply, Run
from supervisors import process_alive


def alive(pid: int) -> bool:
    """True if process ``pid`` runs and is not a zombie; asked before every call
    to an agent (one read of ``/proc``: psutil opened two files, ~0.1 ms)."""
    return process_alive(pid)


def is_answer(*types: type) -> Callable[[Any], bool]:
    return lambda reply: isinstance(reply, types)


def result_for(invocation_id: str) -> Callable[[Any], bool]:
    return lambda reply: isinstance(reply, ResultReply) and reply.invocation_id == invocation_id


def waited_result(reply: ResultReply, invocation_id: str) -> AgentResult:
    """The result a ``WaitResult`` answer carries, or the error it stands for."""
    if not reply.known:
        raise HayataError(f"unknown invocation {invocation_id!r}", code="not_found",
                          invocation_id=invocation_id)
    if reply.recovery_required:
        raise HayataError(f"invocation {invocation_id} is unfinished and nothing runs it; "
                          f"call recover() (or resolve_task()/abandon())",
                          code="recovery_required", invocation_id=invocation_id)
    assert reply.result is not None
    return reply.result


def run_lost(agent_id: str, invocation_id: str) -> RunRejected:
    """An ``invoke`` whose agent restarted before it recorded the run."""
    return RunRejected(f"agent {agent_id!r} restarted before it recorded invocation "
                       f"{invocation_id}; nothing of it ran: invoke it again",
                       code="run_lost", invocation_id=invocation_id)


def system_died(system: RefSystem, invocation_id: str) -> HayataError:
    return HayataError(
        f"the actor system (admin pid {system.admin_pid}) died while waiting for "
        f"invocation {invocation_id}; restart it and recover()", code="no_system",
        invocation_id=invocation_id)


def check_timeout(timeout: Any) -> float:
    """``timeout`` as seconds, or :class:`ConfigError` naming ``timeout``."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not 0 < timeout < 10**7:
        raise ConfigError("timeout", f"must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def check_id(value: Any, field: str) -> str:
    """An invocation or task id: a non-empty str, or :class:`ConfigError` naming
    ``field`` (the agent drops a message of another shape, so the call would only
    time out)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(field, f"must be a non-empty string, got {value!r}")
    return value


def check_result(result: Any) -> dict[str, Any]:
    """A task result for :meth:`AgentRef.resolve_task`: a dict with str keys that
    can be stored durably (what the node would return), or ``ConfigError("result")``."""
    if not isinstance(result, dict) or not all(isinstance(k, str) for k in result):
        raise ConfigError("result", "must be a dict with str keys (what the node would "
                          f"return), got {type(result).__name__}")
    try:
        check_encodable(result, "result")
    except EncodingError as exc:
        raise ConfigError("result", f"cannot be stored durably: {exc}",
                          key=exc.details.get("key")) from exc
    return result


def checked_run(input: Any, subscriber: Any, stream: bool, thread: str | None = None,
                multitask: str = "reject", invocation_id: str | None = None) -> Run:
    """The Run for these options, or the RunRejected (``invalid_option``,
    ``invalid_input``) that the agent would answer, raised here."""
    run = Run(input, subscriber, stream, thread, multitask, invocation_id=invocation_id)
    rejected = validate_run(run)
    if rejected is not None:
        raise rejected
    return run


def checked_invoke(input: Any, thread: str | None, multitask: str) -> Run:
    """The ``Run(wait=True)`` of an ``invoke``, with a new id chosen here, or the
    RunRejected the agent would answer, raised here."""
    run = Run(input, None, False, thread, multitask, wait=True,
              invocation_id=uuid.uuid4().hex)
    rejected = validate_run(run)
    if rejected is not None:
        raise rejected
    return run
