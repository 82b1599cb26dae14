"""What the page's buttons do, checked at the boundary before anything changes.

Each action validates what it is given against the live system and the store
(an unknown agent, task or invocation, a pid that is no longer the actor's)
and raises :class:`ActionError` without changing anything; otherwise it does
what the matching ``hayata`` command does and returns that command with its
answer. Invocations the observer runs or recovers are followed on a thread of
their own that publishes their events (in sequence order) and result.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from hayata_py._errors import HayataError
from hayata_py._observer import _model
from hayata_py._observer._hub import Hub
from hayata_py._observer._watch import ASK_DEADLINE, Source
from hayata_py._present import event_json, result_json, task_rows
from hayata_py._ref import AgentRef
from hayata_py.messages import CALLER, AgentEvent

START_TIMEOUT = 40.0
"""How long a run or recover may take to be accepted (the agent answers within 30 s)."""
FOLLOW_POLL = 1.0
"""While following an invocation, check this often whether the observer stops."""


class ActionError(HayataError):
    """A refused action; ``status`` is the HTTP status the page gets."""

    def __init__(self, status: int, message: str, *, code: str, **details: Any) -> None:
        super().__init__(message, code=code, **details)
        self.status = status


class Actions:
    """The state-changing actions of one observer, and the task table it reads."""

    def __init__(self, source: Source, hub: Hub) -> None:
        self._source = source
        self._system = source.system
        self._hub = hub
        self._hint = source.hint
        self._stop = threading.Event()

    def close(self) -> None:
        """Stop following invocations (they keep running)."""
        self._stop.set()

    # -- reads ---------------------------------------------------------------

    def tasks(self, agent_id: str, invocation_id: str) -> dict[str, Any]:
        store = self._system.store
        record = store.get_invocation(invocation_id)
        if record is None or record.agent_id != agent_id:
            raise ActionError(404, f"agent {agent_id!r} has no invocation {invocation_id!r} "
                              "in the store", code="invocation_not_found",
                              agent_id=agent_id, invocation_id=invocation_id)
        return {"invocation": _model.invocation_row(record),
                "tasks": task_rows(store, record),
                "cli": f"hayata tasks {agent_id} --invocation {invocation_id}{self._hint}"}

    # -- actions -------------------------------------------------------------

    def kill(self, path: Sequence[str], pid: int) -> dict[str, Any]:
        """SIGKILL the actor at ``path`` if it still runs as ``pid`` (what the page showed)."""
        where = "/".join(path)
        # A node that does not answer does not hold the kill back (its edges
        # are not shown then: its supervisor's row is).
        tree = _model.annotate(self._system.tree(describe_timeout=ASK_DEADLINE),
                               self._hint)
        row = _model.find_path(tree, path) if path else None
        if row is None:
            raise ActionError(404, f"no actor {where!r} in the tree (it may have been "
                              "stopped); reload the tree", code="actor_not_found", path=where)
        what = f"{row['role']} {row['id']}" + (f" of agent {row['agent']}"
                                               if row.get("agent") else "")
        current = row.get("pid")
        if row.get("remote"):
            raise ActionError(409, f"{what} runs on another system of the convention (pid "
                              f"{current} there); kill it on that host", code="actor_remote")
        if not current or not row.get("killable"):
            raise ActionError(409, f"{what} has no process to kill ({row.get('status')})",
                              code="actor_not_running")
        if current != pid:
            raise ActionError(409, f"{what} now runs as pid {current}, not {pid}: it restarted "
                              "since the page showed it; nothing was killed",
                              code="pid_changed", pid=current)
        try:
            same_system = os.getsid(pid) == self._system.session_id
        except ProcessLookupError:
            same_system = False
        if not same_system:
            raise ActionError(409, f"pid {pid} ({what}) is not a process of this system",
                              code="not_in_system", pid=pid)
        os.kill(pid, signal.SIGKILL)
        return {"killed": pid, "what": what, "cli": row["cli"]}

    def run(self, agent_id: str, value: Any) -> dict[str, Any]:
        self._known(agent_id)
        invocation_id = self._follow(
            agent_id, lambda ref: ref.run(value, subscriber=CALLER, stream=True))
        return {"invocation_id": invocation_id,
                "cli": _model.run_command(agent_id, json.dumps(value), self._hint)}

    def recover(self, agent_id: str) -> dict[str, Any]:
        self._known(agent_id)
        invocation_id = self._follow(
            agent_id, lambda ref: ref.recover(subscriber=CALLER, stream=True))
        return {"invocation_id": invocation_id,
                "cli": _model.agent_commands(agent_id, None, self._hint)["recover"]}

    def resolve(self, agent_id: str, task_id: str, result: Any) -> dict[str, Any]:
        if not isinstance(result, dict):
            raise ActionError(400, "result must be a JSON object (what the node would have "
                              f"returned), got {type(result).__name__}; e.g. {{\"ok\": true}}",
                              code="invalid_result", field="result")
        self._known(agent_id)
        store = self._system.store
        invocation = store.unfinished_invocation(agent_id)
        if invocation is None:
            raise ActionError(409, f"agent {agent_id!r} has no unfinished invocation; only "
                              "its tasks can be resolved", code="nothing_to_resolve")
        row = next((r for r in task_rows(store, invocation) if r["task_id"] == task_id), None)
        if row is None:
            raise ActionError(404, f"the unfinished invocation {invocation.invocation_id} of "
                              f"agent {agent_id!r} has no task {task_id!r}",
                              code="task_not_found", task_id=task_id)
        if row["classification"] != "uncertain":
            raise ActionError(409, f"task {task_id} is {row['classification']}, not "
                              "uncertain: only an uncertain task is resolved by hand",
                              code="task_not_uncertain", task_id=task_id)
        self._source.ref(agent_id).resolve_task(task_id, result=result)
        return {"resolved": task_id, "cli": _model.resolve_command(
            agent_id, task_id, json.dumps(result), self._hint)}

    def abandon(self, agent_id: str, invocation_id: str) -> dict[str, Any]:
        self._known(agent_id)
        invocation = self._system.store.unfinished_invocation(agent_id)
        if invocation is None or invocation.invocation_id != invocation_id:
            current = invocation.invocation_id if invocation is not None else None
            raise ActionError(404, f"agent {agent_id!r} has no unfinished invocation "
                              f"{invocation_id!r} (its unfinished one: {current})",
                              code="invocation_not_found", invocation_id=invocation_id)
        self._source.ref(agent_id).abandon(invocation_id)
        return {"abandoned": invocation_id,
                "cli": _model.agent_commands(agent_id, invocation_id, self._hint)["abandon"]}

    # -- internals -----------------------------------------------------------

    def _known(self, agent_id: str) -> None:
        started = self._system.agents()
        if agent_id not in started:
            raise ActionError(404, f"no agent {agent_id!r} (started: {started})",
                              code="agent_not_found", agent_id=agent_id)

    def _follow(self, agent_id: str, start: Callable[[AgentRef], str]) -> str:
        """Start an invocation on a thread of its own (its ``hy.CALLER`` inbox is that
        thread's) and publish its messages from there; return its id."""
        started: Future[str] = Future()

        def body() -> None:
            ref = AgentRef(self._system, agent_id)
            try:
                invocation_id = start(ref)
            except BaseException as exc:  # noqa: BLE001 - raised in the request
                started.set_exception(exc)
                return
            started.set_result(invocation_id)
            self._publish_messages(ref, agent_id, invocation_id)

        threading.Thread(target=body, name=f"hayata-observe-follow-{agent_id}",
                         daemon=True).start()
        return started.result(START_TIMEOUT)

    def _publish_messages(self, ref: AgentRef, agent_id: str, invocation_id: str) -> None:
        while not self._stop.is_set():
            try:
                for message in ref.messages(invocation_id, FOLLOW_POLL):
                    if isinstance(message, AgentEvent):
                        self._hub.publish({**event_json(message), "agent_id": agent_id})
                    else:
                        self._hub.publish({**result_json(message), "agent_id": agent_id})
                        return
                    if self._stop.is_set():
                        return
            except TimeoutError:
                if not self._source.alive():
                    self._hub.publish({"kind": "lost", "agent_id": agent_id,
                                       "invocation_id": invocation_id,
                                       "message": "the actor system died"})
                    return
