"""The agent's side of node result caching (``AgentConfig.cache``).

Where the lookup happens, and why no guarantee weakens: the agent looks the
task's key up when the machine dispatches it, before anything is sent to an
edge. On a hit it records the task ``completed`` (``cached``) itself, in one
transaction with the step's checkpoint when that was folded onto the step's
``RunTask`` messages (as an edge's ``started`` would commit it), and only then
feeds the machine the outcome: the store has the result before anyone hears
of it, as for a task an edge ran. Nothing is sent to an edge, so nothing can
run twice. A crash before that commit leaves the task unrecorded (not
started: recovery runs it, or finds it in the cache again); after it, the
task is completed like any other.

On a miss the key is kept (in memory, per invocation) until the task's
outcome: a completed one (never a failure) is stored under it with its
expiry, after the edge recorded the task. A crash in between loses only
that cache entry, never a result: the task record has it. A store that
cannot be read or written right now counts as a miss (logged); a cache never
fails or delays a task's own durability.
"""

from __future__ import annotations

from typing import Any

from hayata_py import _actor_messages as p
from hayata_py import _invocation as m
from hayata_py import _telemetry as telemetry
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.store_access import as_store_error
from hayata_py._cache import cache_key
from hayata_py._config import AgentSpec
from hayata_py._errors import ErrorInfo
from hayata_py._rules.deadlines import invocation_of
from hayata_py.store import InvocationRecord, TaskRecord

__all__ = ["NodeCache"]


class NodeCache:
    """Cache lookups before dispatch and stores after completion, for one agent."""

    def __init__(self, spec: AgentSpec, ledger: Ledger, log: Any) -> None:
        self.spec, self.ledger, self.log = spec, ledger, log
        self.policies = spec.cache if ledger.store is not None else {}
        if spec.cache and ledger.store is None:
            log.warning("cache_without_store", nodes=sorted(spec.cache))
        # invocation id -> task id -> the key its completed result is stored under
        self.pending: dict[str, dict[str, str]] = {}

    def lookup(self, invocation_id: str, token: int, cmd: m.Dispatch,
               checkpoint: InvocationRecord | None) -> m.TaskOutcome | None:
        """The outcome of ``cmd`` from the cache (recorded already), or None: send it."""
        node_id = cmd.key.node_id
        policy = self.policies.get(node_id)
        store = self.ledger.store
        if policy is None or store is None:
            return None
        try:
            key = cache_key(node_id, policy.key, cmd.input, cmd.state)
        except BaseException as failed:  # noqa: BLE001 - user code must never reach Thespian
            self.log.warning("cache_key_failed", node_id=node_id, task_id=cmd.task_id,
                             type=type(failed).__name__, error=str(failed))
            return None
        try:
            found = store.cache_get(self.spec.id, node_id, key)
        except Exception as raw:  # noqa: BLE001 - an unreadable cache is a miss
            self.log.warning("cache_unavailable", node_id=node_id,
                             code=as_store_error(raw).code)
            found = None
        meta = {"agent_id": self.spec.id, "node_id": node_id, "invocation_id": invocation_id,
                "task_id": cmd.task_id}
        if found is None:
            telemetry.execute((*telemetry.CACHE, "miss"), {"count": 1}, meta)
            self.pending.setdefault(invocation_id, {})[cmd.task_id] = key
            return None
        telemetry.execute((*telemetry.CACHE, "hit"), {"count": 1}, meta)
        task = TaskRecord(task_id=cmd.task_id, invocation_id=invocation_id,
                          execution_id=cmd.execution_id, step=cmd.step, node_id=node_id,
                          branch_index=cmd.branch_index, input=cmd.input)
        error = None
        try:
            store.complete_cached(task, token=token, result=found.result, attempt=cmd.attempt,
                                  system_instance=self.spec.instance, checkpoint=checkpoint,
                                  retry=bool(cmd.history))
        except Exception as raw:  # noqa: BLE001 - refused as an edge's start would be
            exc = as_store_error(raw)
            self.log.warning("task_start_refused", task_id=cmd.task_id, code=exc.code)
            error = ErrorInfo(exc.code, f"task {cmd.task_id} not recorded: {exc}",
                              {"node_id": node_id, "task_id": cmd.task_id})
        self.log.info("task_cached", task_id=cmd.task_id, node_id=node_id, ok=error is None)
        return m.TaskOutcome(cmd.execution_id, cmd.key, error is None,
                             found.result if error is None else None, error, cached=True)

    def completed(self, outcome: p.Outcome) -> None:
        """An edge's outcome: a completed task of a cached node stores its result."""
        waiting = self.pending.get(invocation_of(outcome.execution_id))
        key = waiting.pop(outcome.task_id, None) if waiting else None
        store = self.ledger.store
        if key is None or not outcome.ok or store is None:
            return
        ttl = self.policies[outcome.node_id].ttl
        try:
            store.cache_put(self.spec.id, outcome.node_id, key, outcome.result, ttl=ttl)
        except Exception as raw:  # noqa: BLE001 - the result is in its task record anyway
            self.log.warning("cache_put_failed", node_id=outcome.node_id,
                             task_id=outcome.task_id, code=as_store_error(raw).code)

    def forget(self, invocation_id: str) -> None:
        """The invocation ended: its tasks' keys go (a late outcome stores nothing)."""
        self.pending.pop(invocation_id, None)
