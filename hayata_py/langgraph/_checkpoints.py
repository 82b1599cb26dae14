"""A thread's LangGraph checkpoints as hayata keeps them: each run's own with
its steps and its result, linked to the run before it on the thread.

Each step of a run carries in its task inputs (``"s"``) the checkpoints the
decision before it made, from the latest it started at on, with every value
that one refers to; a completed run's result holds those of its last
decision and the run before it (``"prev"``; ``"d"`` says the run's earlier
checkpoints are in its steps). So the newest checkpoint of a run, all a new
run or ``get_state`` needs, is in its result alone, and its whole history is
its steps' merged with it. A run hayata failed, or one a crash left
unfinished, made those of its steps. Reading the chain newest first and
merging oldest first gives LangGraph's ``InMemorySaver`` the thread's history.
"""

from __future__ import annotations

from langgraph._internal._constants import ERROR
from langgraph.checkpoint.memory import InMemorySaver

from hayata_py._errors import ErrorInfo, HayataError
from hayata_py._ref import AgentRef
from hayata_py.langgraph._snapshot import dump_saver, load_saver, load_value, merge_saver
from hayata_py.langgraph._steps import settings_of
from hayata_py.messages import AgentResult
from hayata_py.store import TaskRecord


class ThreadCheckpoints:
    """Reads a thread's checkpoints from an agent's runs."""

    def __init__(self, agent: AgentRef) -> None:
        self.agent = agent

    def invocations(self, thread: str) -> list[tuple[str, str]]:
        """The thread's invocations, newest first, ``(id, status)``; none for a new thread."""
        try:
            return list(self.agent.thread(thread).invocations)
        except HayataError as exc:
            if exc.code == "not_found":
                return []
            raise

    def unfinished(self, thread: str,
                   invocations: list[tuple[str, str]] | None = None) -> str | None:
        """The thread's newest invocation if a crash left it unfinished."""
        for invocation, status in (invocations if invocations is not None
                                   else self.invocations(thread)):
            if status == "running" and self.agent.get_result(invocation) is None:
                unfinished = {u.invocation_id for u in self.agent.unfinished(invocation)}
                return invocation if invocation in unfinished else None
            return None
        return None

    def latest(self, thread: str, invocations: list[tuple[str, str]] | None = None, *,
               live: bool = False) -> tuple[bytes | None, str | None]:
        """The thread's newest checkpoints (those its latest run made, the head
        the thread is at among them) and the invocation holding them;
        ``invocations``: the thread's, if just read. ``live``: a run still
        running counts too, with the supersteps it has completed (what
        LangGraph's ``get_state`` shows during a run); else only ended ones
        (and one a crash left unfinished): what a new run starts from."""
        made, _, invocation = self._newest(thread, invocations, live=live, whole=False)
        return made, invocation

    def _newest(self, thread: str, invocations: list[tuple[str, str]] | None, *,
                live: bool, whole: bool) -> tuple[bytes | None, str | None, str | None]:
        """(:meth:`latest`'s checkpoints, all the run's with ``whole``; the run
        before it; the invocation holding them)."""
        if invocations is None:
            invocations = self.invocations(thread)
        unfinished = None if live else self.unfinished(thread, invocations)
        for invocation, status in invocations:
            if status == "running" and not live and invocation != unfinished:
                continue
            made, prev = self._link(invocation, whole=whole)
            if made is not None:
                return made, prev, invocation
        return None, None, None

    def history(self, thread: str, *, live: bool = False) -> bytes | None:
        """All the thread's checkpoints: the runs' own, along the chain of runs
        (``live``: as :meth:`latest`)."""
        made, prev, invocation = self._newest(thread, None, live=live, whole=True)
        if made is None or invocation is None:
            return None
        links = [made]
        followed = {invocation}
        while prev is not None and prev not in followed:
            followed.add(prev)
            older, next_prev = self._link(prev)
            if older is not None:
                links.append(older)
            prev = next_prev
        saver = load_saver(links[-1])
        for newer in reversed(links[:-1]):
            merge_saver(saver, load_saver(newer))
        return dump_saver(saver)

    def chain_link(self, invocation: str, *, whole: bool = True
                   ) -> tuple[bytes | None, str | None]:
        """(the checkpoints ``invocation`` made, the run before it on the thread;
        ``whole`` False: its newest checkpoint at least)."""
        return self._link(invocation, whole=whole)

    def _link(self, invocation: str, *, whole: bool = True
              ) -> tuple[bytes | None, str | None]:
        """(the checkpoints a run made, the run before it on the thread);
        ``whole`` False: its newest checkpoint at least (what a new run starts
        from), not necessarily the run's earlier ones. A run
        hayata failed (a node's edge died, a timeout, ``abandon``) made those of
        the step it failed in, with the writes of that step's completed tasks and
        an error for the others, as LangGraph keeps a superstep that raised; a
        cancelled one (``cancel()``) or an unfinished or running one, those of
        its step, the completed tasks' writes kept, the rest pending (LangGraph
        keeps a cancelled run's last completed superstep)."""
        result = self.agent.get_result(invocation)
        if result is not None and result.ok and isinstance(result.result, dict):
            made, prev = result.result.get("s"), result.result.get("prev")
            if whole and made is not None and result.result.get("d"):
                made = dump_saver(self._steps_made(self._step_records(invocation),
                                                   load_saver(made)))
            return made, prev
        started = next((e for e in self.agent.events(invocation)
                        if e.type == "invocation_started"), None)
        run = started.data.get("input") if started is not None else None
        prev = run.get("prev") if isinstance(run, dict) else None
        return self._progress(invocation, result, whole), prev

    def _step_records(self, invocation: str) -> list[TaskRecord]:
        """The run's task records that carry a step's checkpoints."""
        return [record for record, _ in self.agent.tasks(invocation)
                if isinstance(record.input, dict) and "s" in record.input]

    @staticmethod
    def _steps_made(records: list[TaskRecord], newest: InMemorySaver | None = None
                    ) -> InMemorySaver:
        """The checkpoints of every step of ``records`` merged oldest first, then
        ``newest`` (a step's tasks all carry the same: one each is read)."""
        saver = load_saver(None)
        seen: set[int] = set()
        for record in sorted(records, key=lambda r: r.step):
            if record.step not in seen:
                seen.add(record.step)
                merge_saver(saver, load_saver(record.input["s"]))
        return merge_saver(saver, newest) if newest is not None else saver

    def _progress(self, invocation: str, result: AgentResult | None,
                  whole: bool = True) -> bytes | None:
        records = self._step_records(invocation)
        if not records:
            return None
        ended = result is not None and not cancelled(result)
        failure = (result.error if result is not None else None) or ErrorInfo(
            "failed", "the run failed", {})
        last = max(record.step for record in records)
        step = [record for record in records if record.step == last]
        settings = settings_of(step[0].input["r"])
        saver = self._steps_made(records if whole else step)
        head = saver.get_tuple(settings.config(addressed=False))  # type: ignore[arg-type]
        if head is None:
            return None
        for record in step:
            task_id = record.input["tasks"][record.node_id]
            if record.status == "completed" and isinstance(record.result, dict) \
                    and "w" in record.result:
                writes = load_value(record.result["w"])
            elif not ended:
                continue  # still to run, or uncertain: the task is pending
            else:
                code, message = failure.code, failure.message
                if record.error:
                    code = str(record.error.get("code", code))
                    message = str(record.error.get("message", message))
                writes = [(ERROR, HayataError(
                    f"hayata ended task {record.task_id} of node {record.node_id!r} "
                    f"({record.status}): {code}: {message}", code=code,
                    task_id=record.task_id))]
            saver.put_writes(head.config, writes, task_id)
        return dump_saver(saver)


def cancelled(result: AgentResult | None) -> bool:
    """``result`` is the end of a run ``cancel()`` stopped."""
    return result is not None and result.error is not None and result.error.code == "cancelled"
