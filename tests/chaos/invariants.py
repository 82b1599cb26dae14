"""The campaign's invariants as a pure function: observations in, violations out.

No processes, no store, no clock: :func:`check` reads what the campaign saw
after one fault (the side-effect file, the task records before and after
recovery, what recovery answered, the results received, the processes and
their parents) and names every broken guarantee. ``tests/unit/test_chaos_invariants.py``
feeds it crafted violating observations, so each rule is known to be able to fail.
"""

from __future__ import annotations

import enum
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hayata_py.store import TaskClass

Effects = Counter[tuple[str, str]]  # ("start" | "end", task_id) -> lines
STORE_REFUSALS = frozenset({"store_unavailable"})  # a write refused, not fenced


def parse_effects(text: str) -> Effects:
    """Count ``start``/``end`` lines per task id (``<event> <task_id> ...``);
    a torn last line (the process died mid-write) is ignored."""
    seen: Effects = Counter()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("start", "end"):
            seen[(parts[0], parts[1])] += 1
    return seen


class Recovery(enum.Enum):
    """How the invocation ended after the fault."""

    NONE = "finished"                   # ran to its end (ok or failed) without recover()
    RECOVERED = "recovered"             # recover() ran it to a result
    REFUSED = "uncertain"               # recover() refused with task_execution_uncertain
    RESOLVED = "uncertain, resolved"    # refused, resolve_task, then recovered
    ABANDONED = "uncertain, abandoned"  # refused, then abandon()
    RECOVERABLE = "recoverable"         # left unfinished on purpose (still recoverable)


@dataclass(frozen=True)
class Task:
    """A task record reduced to what the invariants read."""

    task_id: str
    node_id: str
    status: str
    attempt: int
    klass: TaskClass
    result: Any = None
    execution_id: str = ""
    resolved: bool = False  # completed by resolve_task: it may never have started
    system_instance: str | None = None  # the system that wrote its ``started`` record
    started_at: float | None = None
    finished_at: float | None = None


@dataclass(frozen=True)
class Observation:
    """What the campaign saw for one invocation hit by one fault.

    ``at_fault``: records and effects once the fault has played out (before
    any recover()); ``after``: at the end. ``refused_task_ids``: what a
    refused recovery named; ``effects_at_refusal``: the effects just after it.
    ``terminal_results``: terminal AgentResults received for the invocation;
    ``final_status``: the store's invocation status at the end.
    ``processes``: pid -> parent pid of every process of the system,
    ``admin_pid``: the admin (whose parent is outside the system).
    ``accepted_next``: the system accepted (and finished) a new run afterwards.
    ``final_error``: the code of the error the store ended the invocation with.

    A takeover (a second system recovered the invocation from a frozen first
    one): ``replaced_instance`` is the first system's instance, replaced by
    ``replaced_at`` (a store timestamp at or after the new owner's claim);
    ``tasks_at_takeover`` the records then; ``replaced_pids`` the first
    system's processes; ``effects_after_takeover`` the side-effect lines
    ``(event, task_id, pid)`` appended after ``replaced_at``.
    """

    invocation_id: str
    tasks_at_fault: tuple[Task, ...]
    effects_at_fault: Effects
    tasks_after: tuple[Task, ...]
    effects_after: Effects
    recovery: Recovery
    terminal_results: int
    final_status: str
    active_execution_at_fault: str | None = None
    refused_task_ids: tuple[str, ...] = ()
    effects_at_refusal: Effects | None = None
    processes: Mapping[int, int] = field(default_factory=dict)
    admin_pid: int = 0
    accepted_next: bool = True
    final_error: str | None = None
    replaced_instance: str | None = None
    replaced_at: float = 0.0
    tasks_at_takeover: tuple[Task, ...] = ()
    replaced_pids: frozenset[int] = frozenset()
    effects_after_takeover: tuple[tuple[str, str, int], ...] = ()
    events: tuple[tuple[int, str, Any], ...] | None = None
    """The invocation's stored event log at the end: (sequence, type, data)."""
    live_events: tuple[tuple[int, str, Any], ...] = ()
    """The events a live subscriber of its first run received."""


@dataclass(frozen=True)
class Violation:
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


def _starts(effects: Effects, task_id: str) -> int:
    return effects[("start", task_id)]


def _ends(effects: Effects, task_id: str) -> int:
    return effects[("end", task_id)]


def _recorded_ids(tasks: Iterable[Task]) -> set[str]:
    return {t.task_id for t in tasks}


def check(obs: Observation) -> list[Violation]:
    """Every violated invariant of ``obs`` (empty: all hold)."""
    out: list[Violation] = []
    after = {t.task_id: t for t in obs.tasks_after}
    # 1. No completed result lost.
    for task in obs.tasks_at_fault:
        if task.klass is TaskClass.COMPLETED:
            later = after.get(task.task_id)
            if later is None or later.status != "completed" or later.result != task.result:
                out.append(Violation("completed_result_lost", f"{task.node_id} {task.task_id}: "
                                     f"{task.result!r} -> {later!r}"))
    # 2. No task with a completed record started twice (more often than its attempts).
    for task in (*obs.tasks_at_fault, *obs.tasks_after):
        least = 0 if task.resolved else 1
        if task.klass is TaskClass.COMPLETED and not least <= _starts(obs.effects_after,
                                                                      task.task_id) <= task.attempt:
            out.append(Violation("completed_task_ran_twice", f"{task.node_id} {task.task_id}: "
                                 f"{_starts(obs.effects_after, task.task_id)} starts, "
                                 f"attempt {task.attempt}"))
    for task in obs.tasks_at_fault:
        if task.klass is TaskClass.COMPLETED and (_starts(obs.effects_after, task.task_id)
                                                  > _starts(obs.effects_at_fault, task.task_id)):
            out.append(Violation("completed_task_ran_twice",
                                 f"{task.node_id} {task.task_id} ran again after completing"))
    # 3. Every interrupted task classified as the side-effect file says.
    for task in obs.tasks_at_fault:
        starts = _starts(obs.effects_at_fault, task.task_id)
        ends = _ends(obs.effects_at_fault, task.task_id)
        wrong = (task.klass is TaskClass.COMPLETED and not task.resolved
                 and (starts < 1 or ends < 1)) or \
            (task.klass is TaskClass.NOT_STARTED and starts != 0) or \
            (task.klass is TaskClass.UNCERTAIN and starts > task.attempt) or \
            (task.klass is TaskClass.FAILED and starts > task.attempt)
        if wrong:
            out.append(Violation("misclassified", f"{task.node_id} {task.task_id} is "
                                 f"{task.klass.value} but the effects show {starts} start(s), "
                                 f"{ends} end(s)"))
    for which, tasks, effects in (("at fault", obs.tasks_at_fault, obs.effects_at_fault),
                                  ("after", obs.tasks_after, obs.effects_after)):
        ran = {tid for (event, tid) in effects if event == "start"}
        for tid in sorted(ran - _recorded_ids(tasks)):
            out.append(Violation("ran_unrecorded", f"task {tid} started ({which}) with no record"))
    # 4. A refused recovery names the uncertain tasks and ran nothing.
    if obs.recovery in (Recovery.REFUSED, Recovery.RESOLVED, Recovery.ABANDONED):
        uncertain = {t.task_id for t in obs.tasks_at_fault if t.klass is TaskClass.UNCERTAIN
                     and t.execution_id == obs.active_execution_at_fault}
        if set(obs.refused_task_ids) != uncertain or not uncertain:
            out.append(Violation("refusal_wrong_tasks", f"refused {sorted(obs.refused_task_ids)}, "
                                 f"uncertain {sorted(uncertain)}"))
        if obs.effects_at_refusal is None or obs.effects_at_refusal != obs.effects_at_fault:
            out.append(Violation("refused_recovery_ran_code", "effects changed by a refused "
                                 f"recovery: {_effects_diff(obs)}"))
    # 5. Exactly one terminal AgentResult, or still recoverable.
    if obs.recovery is Recovery.RECOVERABLE:
        if obs.final_status != "running" or obs.terminal_results != 0:
            out.append(Violation("not_recoverable", f"status {obs.final_status}, "
                                 f"{obs.terminal_results} result(s)"))
    elif obs.terminal_results != 1 or obs.final_status not in ("completed", "failed"):
        out.append(Violation("result_count", f"{obs.terminal_results} terminal result(s), "
                             f"status {obs.final_status}"))
    # 6. No process of the system without a supervisor (a parent in the system).
    for pid in orphans(obs.processes, obs.admin_pid):
        out.append(Violation("unsupervised_process", f"pid {pid} (parent "
                             f"{obs.processes[pid]}) is outside the supervision tree"))
    # 7. The system accepts new runs afterwards.
    if not obs.accepted_next:
        out.append(Violation("no_new_runs", "the system refused or failed a new run"))
    # 8. A write the store refused (down, locked, full) keeps the run for recover().
    if obs.final_status == "failed" and obs.final_error in STORE_REFUSALS:
        out.append(Violation("refused_write_failed_run", f"the invocation failed with "
                             f"{obs.final_error} instead of being kept for recover()"))
    # 9. Fencing: nothing written or started by a replaced instance after the takeover.
    if obs.replaced_instance is not None:
        out.extend(_replaced_writes(obs, obs.replaced_instance))
    # 11. The event log: gap-free from 1, and it has every event a live subscriber
    # saw, equal, under the same sequence (an event is stored before it is sent).
    if obs.events is not None:
        stored = {seq: (kind, data) for seq, kind, data in obs.events}
        if sorted(stored) != list(range(1, len(stored) + 1)):
            out.append(Violation("event_log_gap", f"sequences {sorted(stored)}"))
        for seq, kind, data in obs.live_events:
            if stored.get(seq) != (kind, data):
                out.append(Violation("event_log_disagrees", f"live {seq} {kind} {data!r}: "
                                     f"stored {stored.get(seq)!r}"))
    return out


def _effects_diff(obs: Observation) -> str:
    """The side-effect lines that differ between the fault and the refusal."""
    if obs.effects_at_refusal is None:
        return "not read at the refusal"
    at_fault, at_refusal = obs.effects_at_fault, obs.effects_at_refusal
    keys = sorted(set(at_fault) | set(at_refusal))
    return ", ".join(f"{event} {task}: {at_fault[(event, task)]} -> "
                     f"{at_refusal[(event, task)]}" for event, task in keys
                     if at_fault[(event, task)] != at_refusal[(event, task)])


def _replaced_writes(obs: Observation, replaced: str) -> list[Violation]:
    out = []
    for task in obs.tasks_after:
        if task.system_instance != replaced:
            continue
        late_start = (task.started_at or 0.0) > obs.replaced_at
        late_end = not task.resolved and (task.finished_at or 0.0) > obs.replaced_at
        if late_start or late_end:
            out.append(Violation("replaced_instance_wrote", f"{task.node_id} {task.task_id} "
                                 f"{task.status} by the replaced instance after the takeover"))
    # A task the replaced instance had started before the takeover may print its
    # ``start`` line a moment later; no other task may start in its processes.
    begun = {t.task_id for t in obs.tasks_at_takeover
             if t.system_instance == replaced and t.status != "scheduled"}
    for event, task_id, pid in obs.effects_after_takeover:
        if event == "start" and pid in obs.replaced_pids and task_id not in begun:
            out.append(Violation("replaced_instance_wrote", f"task {task_id} started in pid "
                                 f"{pid} of the replaced instance after the takeover"))
    return out


def orphans(processes: Mapping[int, int], admin_pid: int) -> list[int]:
    """Processes (pid -> parent pid) whose parent is not a process of the system;
    the admin's own parent is outside by design."""
    return sorted(pid for pid, ppid in processes.items()
                  if pid != admin_pid and ppid not in processes)


# -- conversation threads (the concurrent campaign) -------------------------------------


@dataclass(frozen=True)
class ThreadRun:
    """One run on a thread as the campaign saw it at the end: ``status`` the
    store's (``completed``/``failed``; ``running``/``queued``/``lost`` for one
    that never ended); ``counted``: its ``count`` task completed by running
    (not by ``resolve_task``), so its increment is in the thread's state;
    ``started``/``ended``: its first task start and last task end (store
    times; None without tasks)."""

    invocation_id: str
    status: str
    counted: bool
    started: float | None = None
    ended: float | None = None


@dataclass(frozen=True)
class ThreadObservation:
    """A conversation thread at the end of a fault: ``runs`` every run ever made
    on it, in the order they were made (the order a thread runs them);
    ``version``, ``state``, ``status``, ``queued``, ``invocations`` (newest
    first, at most ``listed_max``): what ``agent.thread()`` says."""

    thread_id: str
    runs: tuple[ThreadRun, ...]
    version: int
    state: Mapping[str, Any]
    status: str
    queued: tuple[str, ...]
    invocations: tuple[tuple[str, str], ...]
    listed_max: int = 50


def check_thread(obs: ThreadObservation) -> list[Violation]:
    """Every violated invariant of a thread: its final state is the one the runs
    that completed on it made, one at a time, each once."""
    out: list[Violation] = []
    name = obs.thread_id
    # 10. Nothing left running or queued: every enqueued run started and ended.
    if obs.status != "idle" or obs.queued:
        out.append(Violation("thread_stuck", f"{name}: status {obs.status}, queued "
                             f"{list(obs.queued)}"))
    for run in obs.runs:
        if run.status not in ("completed", "failed"):
            out.append(Violation("thread_run_lost", f"{name}: {run.invocation_id} "
                                 f"{run.status}"))
    # 11. The version counts the completed runs; the state holds each counted
    # increment once, in the order the runs were made.
    completed = [r for r in obs.runs if r.status == "completed"]
    if obs.version != len(completed):
        out.append(Violation("thread_version", f"{name}: version {obs.version}, "
                             f"{len(completed)} completed run(s)"))
    counted = [r.invocation_id for r in completed if r.counted]
    seen = list(obs.state.get("seen", []))
    if seen != counted or int(obs.state.get("count", 0)) != len(counted):
        out.append(Violation("thread_state", f"{name}: count {obs.state.get('count')}, "
                             f"seen {seen}, counted runs {counted}"))
    # 12. One run at a time: a run starts after the one before it on the thread ended.
    timed = [r for r in obs.runs if r.started is not None]
    for before, after in itertools.pairwise(timed):
        if before.ended is not None and after.started is not None \
                and after.started < before.ended:
            out.append(Violation("thread_overlap", f"{name}: {after.invocation_id} started "
                                 f"{before.ended - after.started:.3f}s before "
                                 f"{before.invocation_id} ended"))
    # 13. The thread lists its invocations, each once, newest first.
    made = [(r.invocation_id, r.status) for r in obs.runs
            if r.status in ("completed", "failed", "running")]
    want = list(reversed(made))[:obs.listed_max]
    if list(obs.invocations) != want:
        out.append(Violation("thread_invocations", f"{name}: lists {list(obs.invocations)}, "
                             f"made {want}"))
    return out
