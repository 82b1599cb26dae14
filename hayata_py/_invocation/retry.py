"""Retry decisions: pure functions over a policy, a recorded failure and an attempt.

A retry follows only a *known* failure: the node function raised an exception
that matches the policy's ``retry_on`` (the edge checks the class and says so
in ``details["retryable"]``) and the edge recorded the failure. Anything else
(a node that returned a non-dict, an edge that died mid-run, a refused
write) is final. The backoff's due time is the recorded failure time plus
:meth:`RetryPolicy.delay`, which depends only on the policy, the task id and
the attempt: a recovery finds the same due time without any extra record.
"""

from __future__ import annotations

from dataclasses import dataclass

from hayata_py._errors import ErrorInfo
from hayata_py._policy import RetryPolicy


@dataclass(frozen=True)
class RetryPlan:
    """Run attempt ``attempt`` of a task after ``delay`` seconds; ``history`` holds
    the error types of the attempts before it, in order."""

    attempt: int
    delay: float
    history: tuple[str, ...]


def retryable(error: ErrorInfo) -> bool:
    """The node raised a ``retry_on`` exception and its failure was recorded."""
    return error.code == "node_failed" and error.details.get("retryable") is True


def history_of(error: ErrorInfo) -> tuple[str, ...]:
    """The error types of every attempt so far (the edge records them)."""
    attempts = error.details.get("attempts")
    if isinstance(attempts, (list, tuple)) and all(isinstance(a, str) for a in attempts):
        return tuple(attempts)
    return (str(error.details.get("type", error.code)),)


def plan(policy: RetryPolicy | None, error: ErrorInfo, attempt: int, task_id: str
         ) -> RetryPlan | None:
    """What follows failed attempt ``attempt`` of ``task_id``: a retry, or None (final)."""
    if policy is None or not retryable(error) or attempt >= policy.max_attempts:
        return None
    return RetryPlan(attempt + 1, policy.delay(attempt, task_id), history_of(error))


def after_recovery(policy: RetryPolicy | None, error: ErrorInfo, attempt: int,
                   task_id: str, failed_at: float | None, now: float) -> RetryPlan | None:
    """A failed attempt found by ``recover()``: the retry it was waiting for, with
    only what is left of its backoff (``failed_at``: when the failure was recorded)."""
    found = plan(policy, error, attempt, task_id)
    if found is None:
        return None
    left = found.delay if failed_at is None else max(0.0, failed_at + found.delay - now)
    return RetryPlan(found.attempt, min(left, found.delay), found.history)

