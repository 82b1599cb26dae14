"""The service drills of issue 21 on real processes, at any size: the test runs
them small (``tests/chaos/test_drills.py``), ``make chaos`` at full size
(``benchmarks/chaos.py --drill``).

:func:`whole_system_kill`: ``n`` invocations in flight on one service agent,
each held in an ``async def`` node (``edge_concurrency`` tasks per edge, one
edge per node, so the rest wait in the agent's queue, not started): half on a
plain node (a started task is uncertain after a crash), half on an idempotent
one (run again); some of them heads of threads with a run enqueued behind.
The whole system is killed (SIGKILL of every process), the held calls are let
go, a new system starts the agent with ``auto_recover=True``; then

- every invocation without an uncertain task completes, unasked;
- ``unfinished()`` lists exactly the others, ``uncertain``, with their tasks;
- nothing ran twice (the side-effect files): a plain node's task started once
  at most, an idempotent one's at most twice (attempt 2), an uncertain task
  was not run again;
- each enqueued run starts once its thread's head has ended (the uncertain
  heads are resolved or abandoned), runs once, and its thread's version and
  state count the runs that completed on it.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hayata_py as hy
from tests.chaos.invariants import parse_effects
from tests.helpers import alive, eventually

HELD, HELD_IDEMPOTENT = "hold", "hold_i"


def drill_config(n: int, per_edge: int, *, auto_recover: bool = False) -> hy.AgentConfig:
    return hy.AgentConfig(
        id="drill", nodes={HELD: "tests.chaos.nodes:awork", HELD_IDEMPOTENT:
                           "tests.chaos.nodes:awork", "count": "tests.chaos.nodes:count"},
        decision_policy="tests.chaos.nodes:policy", max_invocations=n + n // 10 + 1,
        edge_concurrency={HELD: per_edge, HELD_IDEMPOTENT: per_edge},
        node_concurrency={HELD: 1, HELD_IDEMPOTENT: 1},
        idempotent_nodes=frozenset({HELD_IDEMPOTENT}),
        auto_recover=auto_recover, execution_timeout=600.0)


@dataclass
class DrillReport:
    """What :func:`whole_system_kill` saw; ``problems`` empty: every claim held."""

    invocations: int
    enqueued: int
    started_at_kill: int
    uncertain: int
    auto_completed: int
    seconds: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _starts(path: Path) -> Counter[str]:
    """node id -> start lines in one invocation's side-effect file."""
    out: Counter[str] = Counter()
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "start":
                out[parts[2]] += 1
    return out


def whole_system_kill(workdir: Path, n: int, per_edge: int, store_url: str | None = None,
                      timeout: float = 300.0) -> DrillReport:
    """The drill (module docs): ``n`` in flight, ``per_edge`` tasks per edge."""
    data, gate = workdir / "data", workdir / "gate"
    effects = workdir / "effects"
    effects.mkdir(parents=True)
    clock = time.monotonic()
    seconds: dict[str, float] = {}
    heads: dict[str, str] = {}    # thread -> its head invocation
    behind: dict[str, str] = {}   # thread -> the run enqueued behind its head
    files: dict[str, Path] = {}
    node_of: dict[str, str] = {}
    with hy.AgentSystem(data, store_url=store_url) as system:
        agent = system.start_agent(drill_config(n, per_edge))
        for k in range(n):
            node = HELD if k % 2 == 0 else HELD_IDEMPOTENT
            path = effects / f"{k}.log"
            data_in = {"effects": str(path), "plan": [node, "count"], "gate": str(gate)}
            thread = f"t{k}" if k % 10 == 0 else None
            inv = agent.run(data_in, thread=thread, multitask="enqueue") if thread \
                else agent.run(data_in)
            files[inv], node_of[inv] = path, node
            if thread:
                heads[thread] = inv
        for thread in heads:
            path = effects / f"{thread}-next.log"
            inv = agent.run({"effects": str(path), "plan": ["count"]}, thread=thread,
                            multitask="enqueue")
            files[inv], behind[thread] = path, inv
        capacity = min(n - n // 2, per_edge) + min(n // 2, per_edge)
        eventually(lambda: sum(sum(_starts(files[i]).values()) for i in node_of) >= capacity,
                   timeout, 0.05, f"{capacity} held calls started")
        seconds["start"] = time.monotonic() - clock
        killed = system.kill()
        if any(alive(pid) for pid in killed):
            raise AssertionError("a process survived the kill")
    at_kill = {inv: _starts(path) for inv, path in files.items()}
    uncertain = {inv for inv, node in node_of.items() if node == HELD and at_kill[inv][HELD]}
    gate.touch()
    problems: list[str] = []
    clock = time.monotonic()
    with hy.AgentSystem(data, store_url=store_url) as system:
        agent = system.start_agent(drill_config(n, per_edge, auto_recover=True))
        for inv in node_of:
            if inv in uncertain:
                continue
            result = agent.wait(inv, timeout)
            if not result.ok:
                problems.append(f"{inv} (nothing uncertain) ended {result.error}")
        seconds["auto_recovered"] = time.monotonic() - clock
        listed = agent.unfinished()
        named = {u.invocation_id: u for u in listed}
        if set(named) != uncertain:
            problems.append(f"unfinished() lists {len(named)}, {len(uncertain)} uncertain; "
                            f"extra {sorted(set(named) - uncertain)[:5]}, missing "
                            f"{sorted(uncertain - set(named))[:5]}")
        for inv, entry in named.items():
            if entry.recovery != "uncertain" or not entry.task_ids:
                problems.append(f"{inv} listed {entry.recovery} {entry.task_ids}")
        for thread, inv in behind.items():
            if heads[thread] not in uncertain:
                result = agent.wait(inv, timeout)
                if not result.ok or result.result is None:
                    problems.append(f"{inv} (enqueued) ended {result.error}")
        # Deal with the uncertain ones: resolve half, abandon half.
        for k, inv in enumerate(sorted(uncertain)):
            uncertain_one = named.get(inv)
            if uncertain_one is None:
                continue
            if k % 2 == 0:
                agent.abandon(inv)
            else:
                for task_id in uncertain_one.task_ids:
                    agent.resolve_task(task_id, result={"resolved": task_id})
                agent.recover(inv)
        for inv in uncertain:
            agent.wait(inv, timeout)
        for inv in behind.values():
            result = agent.wait(inv, timeout)
            if not result.ok:
                problems.append(f"{inv} (enqueued behind an uncertain head) ended "
                                f"{result.error}")
        seconds["settled"] = time.monotonic() - clock
        if agent.unfinished():
            problems.append(f"still unfinished: {len(agent.unfinished())}")
        problems += _ran_once(files, node_of, at_kill, uncertain)
        problems += _threads(agent, heads, behind, uncertain, system)
    auto = sum(1 for inv in node_of if inv not in uncertain)
    return DrillReport(n, len(behind), sum(sum(c.values()) for c in at_kill.values()),
                       len(uncertain), auto, seconds, problems)


def _ran_once(files: dict[str, Path], node_of: dict[str, str],
              at_kill: dict[str, Counter[str]], uncertain: set[str]) -> list[str]:
    """Nothing ran twice: a plain node's task at most once, an idempotent one's at
    most twice; an uncertain task not again; every start has its end (a torn
    last line ignored)."""
    out = []
    for inv, path in files.items():
        starts = _starts(path)
        node = node_of.get(inv)
        if starts[HELD] > 1 or starts["count"] > 1 or starts[HELD_IDEMPOTENT] > 2:
            out.append(f"{inv} ran twice: {dict(starts)}")
        if inv in uncertain and starts[HELD] != at_kill[inv][HELD]:
            out.append(f"{inv}: its uncertain task ran again: {dict(starts)}")
        if node == HELD_IDEMPOTENT and starts[HELD_IDEMPOTENT] == 0:
            out.append(f"{inv}: its idempotent task never ran")
        seen = parse_effects(path.read_text()) if path.exists() else Counter()
        if sum(v for (event, _), v in seen.items() if event == "start") < 1:
            out.append(f"{inv}: ran nothing")
    return out


def _threads(agent: hy.AgentRef, heads: dict[str, str], behind: dict[str, str],
             uncertain: set[str], system: hy.AgentSystem) -> list[str]:
    """Each thread: its two runs ended, the version and state count the completed
    ones (a resolved head's counter ran: it counts too)."""
    out = []
    for thread, head in heads.items():
        info = agent.thread(thread)
        statuses = {i: s for i, s in info.invocations}
        completed = [i for i in (head, behind[thread]) if statuses.get(i) == "completed"]
        if info.status != "idle" or info.queued or len(info.invocations) != 2:
            out.append(f"thread {thread}: {info.status}, queued {info.queued}, "
                       f"{len(info.invocations)} invocations")
        if info.version != len(completed) or info.state.get("count") != len(completed) \
                or info.state.get("seen") != completed:
            out.append(f"thread {thread}: version {info.version}, state {info.state}, "
                       f"completed {completed}")
        record: Any = system.store.get_invocation(head)
        if head not in uncertain and (record is None or record.status != "completed"):
            out.append(f"thread {thread}: head {head} {record and record.status}")
    return out
