"""The error a LangGraph run on hayata raises when a crash left a task's outcome unknown."""

from __future__ import annotations

from typing import Any

from hayata_py._errors import HayataError, RecoveryRejected


class TaskUncertain(HayataError):
    """A crash left a LangGraph node's task started with no recorded outcome: it
    may have run (its side effects done) or not. hayata never runs it again by
    itself. ``details``: ``nodes``, ``task_ids``, ``invocation_id``, ``thread_id``.

    Ways out: ``compile(..., uncertain="interrupt")`` and answer the
    interrupt (``Command(resume={"completed": update})`` if the node did its
    work, ``{"rerun": True}``, ``{"abandon": True}``); or
    ``agent.abandon(invocation_id)`` (end the run; the thread keeps its
    progress); or list the node in ``idempotent_nodes`` so recovery runs it again.
    """

    code = "task_uncertain"

    @classmethod
    def of(cls, exc: RecoveryRejected, thread: str, agent_id: str) -> TaskUncertain:
        details: dict[str, Any] = dict(exc.details)
        nodes = list(details.get("node_ids") or [])
        task_ids = list(details.get("task_ids") or [])
        invocation = details.get("invocation_id")
        return cls(
            f"node(s) {nodes} of thread {thread!r} started and a crash left their outcome "
            f"unknown (task ids {task_ids}, invocation {invocation}); hayata does not run "
            f"them again by itself. Find out whether they ran, then: compile the graph with "
            f"uncertain='interrupt' and answer invoke(None, config)'s interrupt with "
            f"Command(resume={{'completed': update}}) if the node did its work (or "
            f"{{'rerun': True}}), or give the run up with "
            f"system.agent({agent_id!r}).abandon({invocation!r}), or declare the node "
            "idempotent (compile(..., idempotent_nodes={...})) so it runs again",
            code=cls.code, nodes=nodes, task_ids=task_ids, invocation_id=invocation,
            thread_id=thread)


class RetryableTaskError(Exception):
    """Raised by a node's task when the node's LangGraph ``retry_policy``
    retries its exception: hayata's durable retry (the policy ``compile``
    derives from it, ``retry_on=(RetryableTaskError,)``) runs it again after
    the backoff, across crashes. The node's exception is its ``__cause__``."""
