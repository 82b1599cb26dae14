"""LangGraph's own loop, driven one superstep at a time by hayata's decisions.

The decision policy and the node processes each open LangGraph's
``SyncPregelLoop`` on the thread's checkpoints (an :class:`InMemorySaver`
loaded from the snapshot the invocation carries), exactly as ``Pregel.stream``
opens it, so LangGraph decides what runs next, with which input and config:

- :func:`advancing` (the policy) hands the last step's task writes to the loop
  as LangGraph's runner would (``put_writes``), lets it apply them at the end
  of the superstep (``after_tick``), and stops at the next superstep whose
  tasks have no writes yet: those are what hayata runs next. It also ends the
  graph as LangGraph does (done, interrupted, out of steps).
- :func:`run_task` (a node) opens the same loop at the same checkpoint, finds
  its task by id and runs it with LangGraph's own config (so ``interrupt()``,
  ``Command``, ``get_stream_writer()`` and ``Send`` work), and returns its writes.

The agent process keeps a run's loop open from one decision to the next
(:mod:`hayata_py.langgraph._warm`); a decision that cannot go on with it (a
new agent process after a crash, a run it dropped) opens the loop again at the
latest checkpoint, and what a continuous run would not do on that re-entry is
undone there: the outputs of re-entering are dropped, the step limit stays the
run's, and the checkpoint's record of what the breakpoints have seen is kept.
"""

from __future__ import annotations

import binascii
import concurrent.futures
import contextlib
import copy
import dataclasses
import sys
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables.config import get_callback_manager_for_config
from langgraph._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_RESUME_MAP,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_STREAM,
    ERROR,
    INTERRUPT,
    NO_WRITES,
    NS_SEP,
    PULL,
    PUSH,
    RESUME,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.constants import START
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.pregel._algo import checkpoint_null_version, prepare_single_task
from langgraph.pregel._loop import SyncPregelLoop
from langgraph.pregel._messages import StreamMessagesHandler
from langgraph.pregel._retry import _should_retry_on, arun_with_retry, run_with_retry
from langgraph.pregel._task_status import CONTROL_WRITES
from langgraph.pregel.main import _coerce_context
from langgraph.pregel.protocol import StreamProtocol
from langgraph.runtime import DEFAULT_RUNTIME, Runtime
from langgraph.types import PregelExecutableTask, StreamMode

from hayata_py.langgraph._errors import RetryableTaskError
from hayata_py.langgraph._events import EVENTS, TaskEvents
from hayata_py.langgraph._graphref import compiled
from hayata_py.langgraph._snapshot import (
    dump_saver,
    dump_value,
    head_id,
    load_saver,
    load_value,
    merge_saver,
    subgraph_saver,
    trim_saver,
)
from hayata_py.langgraph._store import load_store

Chunk = tuple[tuple[str, ...], str, Any]
"""A stream chunk as LangGraph's loop emits it: (namespace, mode, payload)."""


@dataclass(frozen=True)
class Settings:
    """One run's settings, fixed for the whole invocation."""

    graph: str
    thread_id: str
    configurable: dict[str, Any]
    recursion_limit: int = 25
    modes: tuple[str, ...] = ()
    interrupt_before: tuple[str, ...] | str = ()
    interrupt_after: tuple[str, ...] | str = ()
    checkpoint_id: str | None = None
    raise_nodes: tuple[str, ...] = ()
    """Nodes whose exceptions fail their hayata task (so hayata's durable
    ``retry`` policy retries it) instead of ending the run as LangGraph does."""
    output: bool = False
    """Values and updates of the graph's output channels only (``invoke``);
    else of every channel it streams (``stream``)."""
    subgraphs: bool = False
    """Stream the chunks of subgraphs too (``stream(..., subgraphs=True)``)."""
    context: bytes | None = None
    """The run's ``context=`` (LangGraph's runtime context), pickled."""
    store: bytes | None = None
    """The graph's store, as :func:`~hayata_py.langgraph._store.store_spec` gives it."""
    run_id: str | None = None
    """The id of the run's root chain (``config["run_id"]``): the first parent
    of every ``events`` chunk a task makes."""

    def runtime(self, graph: Any, **parts: Any) -> Runtime[Any]:
        """The ``Runtime`` the run's tasks get: its context (coerced to the
        graph's context schema, as LangGraph does) and ``parts``."""
        context = load_value(self.context) if self.context is not None else None
        if self.store is not None:
            parts["store"] = load_store(self.store)
        if context is None and not parts:
            return DEFAULT_RUNTIME
        return DEFAULT_RUNTIME.merge(Runtime(
            context=_coerce_context(graph.context_schema, context), **parts))

    def config(self, *, addressed: bool) -> dict[str, Any]:
        configurable = {**self.configurable, "thread_id": self.thread_id,
                        CONFIG_KEY_CHECKPOINT_NS: ""}
        if addressed and self.checkpoint_id:
            configurable[CONFIG_KEY_CHECKPOINT_ID] = self.checkpoint_id
        return {"configurable": configurable, "recursion_limit": self.recursion_limit,
                "metadata": {}, "tags": [], "callbacks": None}


@dataclass
class Carry:
    """What one decision tells the next about the run: the loop's step limit,
    the run's first superstep, whether the run resumed the thread, and the
    channel versions the breakpoints had seen when the loop stopped."""

    stop: int
    first_step: int
    resuming: bool
    seen: dict[str, Any] | None = None
    resume_map: bytes | None = None
    """A ``Command(resume={interrupt id: value})``'s map, pickled: LangGraph
    keeps it in the run's config, where every task of the run reads it."""
    interrupts: bytes | None = None
    """The interrupts the run has streamed so far, pickled (``invoke`` returns
    them all, also those of an earlier hayata step of the last superstep)."""

    def as_dict(self) -> dict[str, Any]:
        return {"stop": self.stop, "first_step": self.first_step, "resuming": self.resuming,
                "seen": self.seen, "resume_map": self.resume_map,
                "interrupts": self.interrupts}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Carry:
        seen = data.get("seen")
        return cls(int(data["stop"]), int(data["first_step"]), bool(data["resuming"]),
                   dict(seen) if seen is not None else None, data.get("resume_map"),
                   data.get("interrupts"))

    def streamed(self, chunks: list[Chunk]) -> None:
        """Add the interrupts of ``chunks`` to :attr:`interrupts`."""
        found = [interrupt for namespace, mode, payload in chunks
                 if not namespace and mode == "updates" and isinstance(payload, dict)
                 for interrupt in payload.get(INTERRUPT, ())]
        if found:
            before = load_value(self.interrupts) if self.interrupts else []
            self.interrupts = dump_value([*before, *found])

    def all_interrupts(self) -> list[Any]:
        """Every interrupt the run streamed."""
        return load_value(self.interrupts) if self.interrupts else []


@dataclass(frozen=True)
class Todo:
    """A task LangGraph's loop wants run: its id, its node's name and its
    path in the superstep (``("__pregel_pull", node)`` or
    ``("__pregel_push", index)``; None for another kind)."""

    id: str
    name: str
    path: tuple[str, str | int] | None = None


@dataclass
class Outcome:
    """What :func:`advancing` found: tasks to run, or the end of the run."""

    snapshot: bytes
    carry: Carry
    chunks: list[Chunk] = field(default_factory=list)
    todo: list[Todo] = field(default_factory=list)
    status: str = "run"
    """``run`` (``todo`` to run), ``done``, ``interrupted``, ``out_of_steps`` or
    ``error`` (a node raised ``error``)."""
    output: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class TaskResult:
    """A task's writes as the node process returns them."""

    writes: list[tuple[str, Any]]
    interrupted: bool = False
    failed: bool = False
    """The node raised: ``writes`` is ``[(ERROR, exception)]``."""
    subgraphs: bytes | None = None
    """The checkpoints of the subgraphs the task ran (namespaces other than the
    graph's own), as a saver's bytes, so a subgraph resumes where it stopped."""


def _inline(fn: Callable[..., Any], *args: Any, __name__: str | None = None,
            __cancel_on_exit__: bool = False, __reraise_on_exit__: bool = True,
            __next_tick__: bool = False, **kwargs: Any) -> concurrent.futures.Future[Any]:
    """``BackgroundExecutor.submit`` done at once, in this thread."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(fn(*args, **kwargs))
    return future


class _Loop(SyncPregelLoop):
    """LangGraph's loop with its checkpointer calls made in place: the saver
    is in memory, and a thread per loop would cost more than the calls."""

    @property
    def submit(self) -> Any:
        return _inline

    @submit.setter
    def submit(self, value: Any) -> None:
        """The loop's own executor stays on its exit stack, unused."""


def _loop(settings: Settings, saver: Any, input: Any, stream: Callable[[Chunk], None],
          modes: set[StreamMode], *, addressed: bool, breakpoints: bool,
          runtime: Runtime[Any] | None = None, manager: Any = None) -> SyncPregelLoop:
    graph = compiled(settings.graph, settings.interrupt_before, settings.interrupt_after)
    base: Any = settings.config(addressed=addressed)
    if graph.config:
        base = {**dict(graph.config), **base}
    config: Any = graph._own_checkpoint_config(base)  # as Pregel.stream does
    config[CONF][CONFIG_KEY_RUNTIME] = runtime or settings.runtime(graph)
    return _Loop(
        input, stream=StreamProtocol(stream, modes), config=config,
        store=load_store(settings.store), cache=None, checkpointer=saver, nodes=graph.nodes,
        specs=graph.channels,
        output_keys=graph.output_channels if settings.output else graph.stream_channels_asis,
        input_keys=graph.input_channels,
        stream_keys=graph.stream_channels_asis,
        interrupt_before=(graph.interrupt_before_nodes if breakpoints else ()),
        interrupt_after=(graph.interrupt_after_nodes if breakpoints else ()),
        manager=manager, durability="sync", trigger_to_nodes=graph.trigger_to_nodes,
        migrate_checkpoint=graph._migrate_checkpoint,
        retry_policy=graph.retry_policy, cache_policy=graph.cache_policy)


def _reenter(loop: SyncPregelLoop, carry: Carry) -> None:
    """Undo what opening the loop again did that a continuous run does not."""
    if carry.seen is not None:
        loop.checkpoint["versions_seen"][INTERRUPT] = dict(carry.seen)
    else:
        loop.checkpoint["versions_seen"].pop(INTERRUPT, None)
    loop.stop = carry.stop
    _resuming_flag(loop, carry)


def _resuming_flag(loop: SyncPregelLoop, carry: Carry) -> None:
    if carry.resume_map is not None:
        loop.config[CONF][CONFIG_KEY_RESUME_MAP] = load_value(carry.resume_map)
    if loop.step == carry.first_step and carry.resuming:
        loop.config[CONF][CONFIG_KEY_RESUMING] = True
    else:
        loop.config[CONF].pop(CONFIG_KEY_RESUMING, None)


Advancing = Generator[Outcome, dict[str, TaskResult], Outcome]
"""A run's loop, open: each ``Outcome`` it yields stops at tasks to run, and it
goes on with their results sent in; it returns the outcome that ends the run."""


def advancing(settings: Settings, snapshot: bytes | None, input: Any,
              results: dict[str, TaskResult] | None, carry: Carry | None) -> Advancing:
    """A decision: with ``results`` None, start the run with ``input``; else
    hand the last step's task results to the loop and go on. Yields at the
    next tasks to run (their results sent in go on from there, as LangGraph's
    own loop goes on: opening the loop again on the yielded snapshot and carry
    instead gives the same, they hold all the loop keeps); returns the end of
    the run.

    An outcome's snapshot holds the checkpoints this decision made, from the
    latest it opened the loop at on (:func:`trim_saver`): with that one and
    every value it refers to, it is all a task or the next decision needs to
    open the loop again. The checkpoints of the run's earlier steps stay with
    those steps' inputs, the thread's older ones with the runs that made them
    (:mod:`hayata_py.langgraph._checkpoints` gathers them), so a step's data
    grows with the graph's state, not with the number of steps before it."""
    saver = load_saver(snapshot)
    first = results is None
    mark = [head_id(saver, settings.thread_id)]  # where this decision's checkpoints start
    chunks: list[list[Chunk]] = [[]]
    keep = [first]

    def put(chunk: Chunk) -> None:
        if keep[0]:
            chunks[0].append(chunk)

    modes: Any = set(settings.modes)
    loop = _loop(settings, saver, input if first else None, put, modes,
                 addressed=first, breakpoints=True)
    pending = dict(results or {})
    interrupted = False
    try:
        with loop:
            if carry is None:
                resume_map = loop.config[CONF].get(CONFIG_KEY_RESUME_MAP)
                carry = Carry(loop.stop, loop.step,
                              bool(loop.config[CONF].get(CONFIG_KEY_RESUMING, False)),
                              resume_map=None if resume_map is None
                              else dump_value(resume_map))
            else:
                _reenter(loop, carry)
            while loop.tick():
                keep[0] = True
                while True:
                    interrupts: list[Any] = []
                    errors: list[BaseException] = []
                    missing = []
                    # tasks of this superstep that this run already saw interrupted (in
                    # an earlier hayata step of the superstep): not run again before it ends
                    asked = {} if first else {
                        tid: value for tid, channel, value in loop.checkpoint_pending_writes
                        if channel == INTERRUPT}
                    for task in list(loop.tasks.values()):
                        if task.writes:
                            continue
                        result = pending.pop(task.id, None)
                        if result is not None and result.subgraphs:
                            merge_saver(saver, load_saver(result.subgraphs))
                        if result is None and task.name == START:
                            result = _run_start(task, settings)
                        if result is None and task.id in asked:
                            interrupts.extend(asked[task.id])
                            continue
                        if result is None:
                            missing.append(Todo(task.id, task.name, _plain_path(task.path)))
                        elif result.failed:
                            # as LangGraph's runner commits a task that raised
                            errors.extend(v for c, v in result.writes if c == ERROR)
                            task.writes.extend(result.writes)
                            loop.put_writes(task.id, task.writes)
                        elif result.interrupted:
                            for channel, value in result.writes:
                                if channel == INTERRUPT:
                                    interrupts.extend(value)
                            loop.put_writes(task.id, result.writes)
                        else:
                            task.writes.extend(result.writes)
                            loop.put_writes(task.id, task.writes)
                    if errors:
                        # as LangGraph's runner: the first error ends the superstep, and
                        # its tasks not run yet stay without writes (they run on resume)
                        raise errors[0]
                    if not missing:
                        break
                    # stop for hayata to run the missing tasks; their results go on
                    seen = loop.checkpoint["versions_seen"].get(INTERRUPT)
                    carry.seen = copy.deepcopy(seen) if seen is not None else None
                    carry.streamed(chunks[0])
                    stopped = Outcome(_carried(settings, saver, mark[0]),
                                      dataclasses.replace(carry), chunks[0], missing)
                    chunks[0] = []
                    first = False
                    mark[0] = head_id(saver, settings.thread_id)
                    pending = dict((yield stopped))
                if interrupts:
                    interrupted = True
                    raise GraphInterrupt(tuple(interrupts))
                loop.after_tick()
                _resuming_flag(loop, carry)
    except Exception as exc:  # noqa: BLE001 - a node's error, or LangGraph's loop refused
        # (EmptyInputError, InvalidUpdateError, ...): the run ends with it, as
        # LangGraph's does, keeping what the loop saved before it raised
        carry = carry or Carry(0, 0, False)
        return Outcome(_carried(settings, saver, mark[0]), carry, chunks[0], [], "error",
                       error=exc)
    assert carry is not None
    carry.streamed(chunks[0])
    status: str = loop.status
    if interrupted or status in ("interrupt_before", "interrupt_after"):
        status = "interrupted"
    return Outcome(_carried(settings, saver, mark[0]), carry, chunks[0], [], status,
                   loop.output)


def _plain_path(path: tuple[Any, ...]) -> tuple[str, str | int] | None:
    """A task's path when it alone names the task to prepare: a node's
    (PULL) or a ``Send``'s (PUSH by index); else None."""
    if len(path) == 2 and ((path[0] == PULL and isinstance(path[1], str))
                           or (path[0] == PUSH and type(path[1]) is int)):
        return (path[0], path[1])
    return None


def _prepare(loop: SyncPregelLoop, task_id: str, path: tuple[str, str | int] | None
             ) -> PregelExecutableTask | None:
    """Task ``task_id`` of the superstep the open loop is at: prepared alone
    from its ``path`` as ``tick`` prepares each task of the superstep (None:
    not this way, so ``tick`` prepares them all). Its id, which LangGraph
    derives from the checkpoint, the step and the path, proves it the same."""
    if path is None or loop.step > loop.stop:
        return None
    checkpoint = loop.checkpoint
    task = prepare_single_task(
        path, None, checkpoint=checkpoint,
        checkpoint_id_bytes=binascii.unhexlify(checkpoint["id"].replace("-", "")),
        checkpoint_null_version=checkpoint_null_version(checkpoint),
        pending_writes=loop.checkpoint_pending_writes, processes=loop.nodes,
        channels=loop.channels, managed=loop.managed, config=loop.config, step=loop.step,
        stop=loop.stop, for_execution=True, store=loop.store, checkpointer=loop.checkpointer,
        manager=loop.manager, input_cache={}, cache_policy=loop.cache_policy,
        retry_policy=loop.retry_policy)
    if not isinstance(task, PregelExecutableTask) or task.id != task_id:
        return None
    loop.tasks = {task.id: task}
    return task


def _run_start(task: PregelExecutableTask, settings: Settings) -> TaskResult:
    """Run the graph's ``__start__`` task here, as LangGraph's runner runs it
    (with its retry policy): it maps the input to channels and runs the path
    functions of conditional edges from START, so no process is worth a hop
    for it, and it has none. An error becomes its ``ERROR`` write (an
    ``interrupt()`` its interrupt), as a node's does."""
    try:
        run_with_retry(task, None)
    except Exception as exc:  # noqa: BLE001 - any error, as LangGraph's runner
        result = _raised(task, exc, settings, sys.maxsize)
    else:
        result = _done(task)
    task.writes.clear()
    return result


def has_history_channels(settings: Settings) -> bool:
    """Whether a channel of the graph reads its checkpoints' history (a
    ``DeltaChannel``): its runs then carry the thread's whole history."""
    graph = compiled(settings.graph, settings.interrupt_before, settings.interrupt_after)
    return any(isinstance(channel, DeltaChannel) for channel in graph.channels.values())


def _carried(settings: Settings, saver: Any, since: str | None) -> bytes:
    """The checkpoints from ``since`` (the latest when the decision opened the
    loop; None: all) on, or all of them for a graph with history channels."""
    if has_history_channels(settings):
        return dump_saver(saver)
    return dump_saver(trim_saver(saver, settings.thread_id, since))


@contextlib.contextmanager
def open_task(settings: Settings, snapshot: bytes, carry: Carry, task_id: str,
              emit: Callable[[Chunk], None] | None,
              path: tuple[str, str | int] | None = None) -> Iterator[PregelExecutableTask]:
    """The executable task ``task_id`` of the superstep the loop is at, built
    by LangGraph's loop opened on ``snapshot`` with LangGraph's own config
    (``path``: the task's, if known: only it is prepared)."""
    with _opened(settings, snapshot, carry, task_id, emit, path) as (task, _):
        yield task


@contextlib.contextmanager
def _opened(settings: Settings, snapshot: bytes, carry: Carry, task_id: str,
            emit: Callable[[Chunk], None] | None, path: tuple[str, str | int] | None = None
            ) -> Iterator[tuple[PregelExecutableTask, InMemorySaver]]:
    saver = load_saver(snapshot)
    modes = set(settings.modes) & {"custom", "messages", EVENTS} if emit is not None \
        else set[str]()
    graph = compiled(settings.graph, settings.interrupt_before, settings.interrupt_after)
    runtime = settings.runtime(graph)
    manager = None
    handler: StreamMessagesHandler | None = None
    events: TaskEvents | None = None
    if emit is not None and "custom" in modes:
        def writer(chunk: Any) -> None:
            namespace = get_config()[CONF][CONFIG_KEY_CHECKPOINT_NS].split(NS_SEP)[:-1]
            emit((tuple(namespace), "custom", chunk))
        runtime = settings.runtime(graph, stream_writer=writer)
    if emit is not None and modes & {"messages", EVENTS}:
        # the graph's run, under which LangGraph's runner raises the task's callbacks
        manager = get_callback_manager_for_config({}).on_chain_start(
            None, {}, name=settings.graph,
            run_id=uuid.UUID(settings.run_id) if settings.run_id else None)
        if "messages" in modes:
            handler = StreamMessagesHandler(emit, settings.subgraphs)
            manager.inheritable_handlers.append(handler)
        if EVENTS in modes:
            events = TaskEvents(lambda event: emit(((), EVENTS, event)))
            manager.inheritable_handlers.append(events)
    loop = _loop(settings, saver, None, lambda chunk: None, set(), addressed=False,
                 breakpoints=False, runtime=runtime, manager=manager)
    with loop:
        loop.stop = carry.stop
        _resuming_flag(loop, carry)
        if handler is not None:
            handler.parent_ns = loop.checkpoint_ns
        if emit is not None and settings.subgraphs:
            # a subgraph run by the task streams into this (as Pregel.stream sets it)
            loop.config[CONF][CONFIG_KEY_STREAM] = StreamProtocol(
                emit, set(settings.modes))  # type: ignore[arg-type]
        task = _prepare(loop, task_id, path)
        if task is None:
            loop.tick()
            task = loop.tasks.get(task_id)
        if task is None:
            raise LookupError(f"task {task_id} is not one of the superstep's tasks "
                              f"{sorted(t.name for t in loop.tasks.values())}: the thread's "
                              "checkpoint changed under this run")
        try:
            yield task, saver
        finally:
            if events is not None:
                events.flush()  # what threads the node started made last


def _with_subgraphs(result: TaskResult, saver: InMemorySaver, settings: Settings
                    ) -> TaskResult:
    """``result`` with the checkpoints the task's subgraphs saved, if any."""
    nested = subgraph_saver(saver, settings.thread_id)
    if nested is None:
        return result
    return dataclasses.replace(result, subgraphs=dump_saver(nested))


def _without_retries(task: PregelExecutableTask) -> PregelExecutableTask:
    """The task with LangGraph's own retries off: hayata retries it durably."""
    return dataclasses.replace(task, retry_policy=())


def _done(task: PregelExecutableTask) -> TaskResult:
    """The writes of a task that returned, as LangGraph's runner commits them."""
    writes = list(task.writes)
    if all(channel in CONTROL_WRITES for channel, _ in writes):
        writes.append((NO_WRITES, None))
    return TaskResult(writes)


def finished_writes(task: PregelExecutableTask, update: Any) -> list[tuple[str, Any]]:
    """The writes ``task`` makes when its node returns ``update``: the node's
    own writers (channel writes, edges, conditional edges) run on it."""
    task.writes.clear()
    for writer in task.writers:
        writer.invoke(update, task.config)
    return _done(task).writes


def _raised(task: PregelExecutableTask, exc: Exception, settings: Settings,
            attempt: int) -> TaskResult:
    """The result of a task that raised ``exc``, or ``exc`` (or a
    :class:`RetryableTaskError`) raised again for hayata to handle."""
    if isinstance(exc, GraphInterrupt):
        writes: list[tuple[str, Any]] = [(INTERRUPT, exc.args[0])]
        writes.extend(w for w in task.writes if w[0] == RESUME)
        return TaskResult(writes, interrupted=True)
    if isinstance(exc, GraphBubbleUp) or task.name in settings.raise_nodes:
        raise exc
    matching = next((p for p in task.retry_policy if _should_retry_on(p, exc)), None)
    if matching is not None and attempt < matching.max_attempts:
        raise RetryableTaskError(f"{task.name}: {type(exc).__name__}: {exc}") from exc
    return TaskResult([(ERROR, exc)], failed=True)


def _streams_events(settings: Settings, emit: Callable[[Chunk], None] | None) -> bool:
    return emit is not None and EVENTS in settings.modes


class _Streamed:
    """A task's runnable whose ``invoke`` streams it to its end (what
    LangGraph's runner does with ``stream=True``, for a sync run)."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc

    def invoke(self, input: Any, config: Any) -> None:
        for _ in self.proc.stream(input, config):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.proc, name)


def run_task(settings: Settings, snapshot: bytes, carry: Carry, task_id: str,
             emit: Callable[[Chunk], None] | None, attempt: int = 1,
             path: tuple[str, str | int] | None = None) -> TaskResult:
    """Run one task of the superstep the loop is at, in this process, as
    LangGraph's runner runs it; ``emit`` gets its ``custom`` and ``messages``
    chunks (None: the run does not stream them).

    A node's exception becomes the task's ``ERROR`` write, as LangGraph's
    runner records it; but when the node's ``retry_policy`` retries it and
    ``attempt`` (hayata's, 1-based) is below that policy's ``max_attempts``,
    :class:`RetryableTaskError` is raised instead so hayata retries the task
    durably; a node in ``settings.raise_nodes`` raises its exception as it is.
    ``path``: the task's (:class:`Todo`), if known."""
    with _opened(settings, snapshot, carry, task_id, emit, path) as (task, saver):
        try:
            if _streams_events(settings, emit):
                # streamed, as LangGraph's astream_events runs a task, so its
                # output is an event too (on_chain_stream); on this thread, so
                # its events go out as they come, in order
                task = dataclasses.replace(task, proc=_Streamed(task.proc))  # type: ignore[arg-type]
            run_with_retry(_without_retries(task), None)
        except Exception as exc:  # noqa: BLE001 - any node error, as LangGraph's runner
            return _with_subgraphs(_raised(task, exc, settings, attempt), saver, settings)
        return _with_subgraphs(_done(task), saver, settings)


async def arun_task(settings: Settings, snapshot: bytes, carry: Carry, task_id: str,
                    emit: Callable[[Chunk], None] | None, attempt: int = 1,
                    path: tuple[str, str | int] | None = None) -> TaskResult:
    """:func:`run_task` for an ``async def`` node, on the caller's event loop."""
    with _opened(settings, snapshot, carry, task_id, emit, path) as (task, saver):
        try:
            await arun_with_retry(_without_retries(task), None,
                                  stream=_streams_events(settings, emit))
        except Exception as exc:  # noqa: BLE001 - any node error, as LangGraph's runner
            return _with_subgraphs(_raised(task, exc, settings, attempt), saver, settings)
        return _with_subgraphs(_done(task), saver, settings)
