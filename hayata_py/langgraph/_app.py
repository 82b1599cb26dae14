"""``HayataGraph``: the part of LangGraph's compiled-graph interface users call,
carried out by a hayata agent (one durable task per LangGraph task)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Sequence
from typing import Any

from langgraph._internal._constants import INTERRUPT
from langgraph.channels.delta import DeltaChannel
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot

from hayata_py import _ref_wait
from hayata_py._api import AgentSystem
from hayata_py._async import AsyncAgentRef, AsyncAgentSystem
from hayata_py._errors import ConfigError, HayataError, RecoveryRejected
from hayata_py._ref import AgentRef
from hayata_py._ref_checks import check_timeout, checked_invoke
from hayata_py._stream_end import file_ended
from hayata_py.langgraph._checkpoints import ThreadCheckpoints
from hayata_py.langgraph._errors import TaskUncertain
from hayata_py.langgraph._events import EVENTS, run_ended, run_started
from hayata_py.langgraph._graphref import builder_of, compiled
from hayata_py.langgraph._snapshot import (
    dump_saver,
    dump_value,
    head_id,
    load_saver,
    load_value,
    trim_saver,
)
from hayata_py.langgraph._uncertain import (
    ANSWERS,
    answer,
    interrupt_chunks,
    record_answer,
    uncertain_records,
)
from hayata_py.messages import CALLER, AgentEvent, AgentResult

_INTERNAL = ("thread_id", "checkpoint_ns", "checkpoint_id")
_MODES = frozenset(("values", "updates", "custom", "messages", "debug", "tasks", "checkpoints",
                    EVENTS))
DURABILITY = ("sync", "async", "exit")
"""LangGraph's ``durability`` values: each is accepted, and hayata always
records a task before and after it runs (at least ``"sync"``)."""


def _merged(base: dict[str, Any], config: Any) -> dict[str, Any]:
    """``config`` over ``base``; their ``configurable`` dicts merged too."""
    if not isinstance(config, dict):
        return config  # type: ignore[no-any-return]
    merged = {**base, **config}
    if "configurable" in base or "configurable" in config:
        merged["configurable"] = {**(base.get("configurable") or {}),
                                  **(config.get("configurable") or {})}
    return merged


def invocation_of(config: Any) -> str | None:
    """The invocation id a new run of ``config`` gets: its ``run_id`` (LangGraph's
    id of the run, a UUID) as 32 hex digits; None (hayata chooses) without one.
    The caller that chose the run id can then tell, after a crash, whether the
    run began: the thread's invocations name it."""
    run_id = config.get("run_id") if isinstance(config, dict) else None
    if run_id is None:
        return None
    try:
        return uuid.UUID(str(run_id)).hex
    except ValueError:
        raise ConfigError("config['run_id']", f"must be a UUID, got {run_id!r:.80}") from None


def thread_of(config: Any) -> str:
    """The thread id of a LangGraph config; a clear error before anything runs."""
    configurable = (config or {}).get("configurable") if isinstance(config, dict) else None
    thread = configurable.get("thread_id") if isinstance(configurable, dict) else None
    if not isinstance(thread, str) or not thread or len(thread) > 256:
        raise ConfigError("config", "config['configurable']['thread_id'] must be a non-empty "
                          "string of at most 256 characters (the hayata thread the graph "
                          f"runs on), got {thread!r:.80}")
    return thread


def _check_durability(durability: Any) -> None:
    """LangGraph's ``durability`` values pass (hayata's records are always at
    least ``"sync"``); anything else is refused before the run starts."""
    if durability is not None and durability not in DURABILITY:
        raise ConfigError("durability", f"must be one of {list(DURABILITY)} (or left out), "
                          f"got {durability!r:.80}; hayata records every task durably "
                          "before and after it runs, whichever of them is given")


STARTS_IN_FLIGHT = 32
"""Streamed runs of one agent whose ``Run`` this process has sent and the agent
not yet accepted, at most: a thousand runs started at once wait their turn
here, not for the agent's answer (which has a timeout) behind all the others."""
SILENCE_CHECK_MAX = 8.0
"""Seconds of silence, at most, between two asks of a streamed run's agent
whether it still runs the run."""
_STARTS: dict[tuple[int, str], threading.BoundedSemaphore] = {}
_STARTS_LOCK = threading.Lock()


def _starts(agent: AgentRef) -> threading.BoundedSemaphore:
    """The semaphore the streamed runs of ``agent`` take to send their ``Run``."""
    with _STARTS_LOCK:
        return _STARTS.setdefault((id(agent.system), agent.id),
                                  threading.BoundedSemaphore(STARTS_IN_FLIGHT))


def _stored(value: Any, field: str) -> bytes:
    """``value`` as the bytes a run carries; a clear error if it cannot be."""
    try:
        return dump_value(value)
    except Exception as exc:  # pickle raises many kinds
        raise ConfigError(field, f"cannot be pickled ({type(exc).__name__}: {exc}); the "
                          "graph's processes receive it pickled") from exc


def _values(chunks: Iterable[tuple[str, Any]]) -> Any:
    """What ``invoke`` returns from a run's interrupts and final values: the
    values, with ``__interrupt__`` when it stopped at interrupts."""
    latest: Any = None
    interrupts: list[Any] = []
    for mode, payload in chunks:
        if mode == "updates" and isinstance(payload, dict) \
                and (found := payload.get(INTERRUPT)) is not None:
            interrupts.extend(found)
        elif mode == "values":
            latest = payload
    if interrupts:
        return {**latest, INTERRUPT: interrupts} if isinstance(latest, dict) \
            else {INTERRUPT: interrupts}
    return latest


class HayataGraph:
    """A LangGraph graph run by a hayata agent: ``invoke``, ``stream``,
    ``get_state``, ``get_state_history``, ``update_state`` as LangGraph's
    compiled graph has them, with the thread's checkpoints in hayata's store;
    ``cancel`` stops a thread's running run as LangGraph's server does."""

    def __init__(self, path: str, system: AgentSystem, agent: AgentRef, *,
                 interrupt_before: Sequence[str] | str | None,
                 interrupt_after: Sequence[str] | str | None, uncertain: str,
                 timeout: float, raise_nodes: Collection[str] = (),
                 async_system: AsyncAgentSystem | None = None,
                 store: bytes | None = None) -> None:
        self.path = path
        self.system = system
        self.async_system = async_system
        """The ``AsyncAgentSystem`` the graph was compiled on, if any."""
        self.agent = agent
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self.uncertain = uncertain
        self.timeout = timeout
        self.raise_nodes = sorted(raise_nodes)
        self.store = store
        """The graph's store as its runs carry it (``compile(..., store=...)``)."""
        self.config: dict[str, Any] = {}
        self.threads = ThreadCheckpoints(agent)
        self._starting = _starts(agent)
        self._history_channels = any(isinstance(channel, DeltaChannel) for channel in
                                     builder_of(path).compile().channels.values())

    def with_config(self, config: Any = None, **kwargs: Any) -> HayataGraph:
        """A copy of this graph whose calls merge ``config`` (and ``kwargs``)
        under their own config, as LangGraph's ``with_config``."""
        copy = HayataGraph(self.path, self.system, self.agent,
                           interrupt_before=self.interrupt_before,
                           interrupt_after=self.interrupt_after, uncertain=self.uncertain,
                           timeout=self.timeout, raise_nodes=self.raise_nodes,
                           async_system=self.async_system, store=self.store)
        copy.config = _merged(self.config, {**(config or {}), **kwargs})
        return copy

    # -- running -------------------------------------------------------------------

    def invoke(self, input: Any, config: Any = None, *, stream_mode: str = "values",
               **kwargs: Any) -> Any:
        """Run the graph to its end or its next interrupt, as LangGraph's ``invoke``."""
        if stream_mode == "values":
            return _values(self._quiet(input, config, **kwargs))
        return list(self._stream(input, config, stream_mode=stream_mode, output=True,
                                 **kwargs))

    def stream(self, input: Any, config: Any = None, *,
               stream_mode: str | Sequence[str] | None = None,
               interrupt_before: Sequence[str] | str | None = None,
               interrupt_after: Sequence[str] | str | None = None,
               subgraphs: bool = False, durability: str | None = None,
               context: Any = None, **kwargs: Any) -> Iterator[Any]:
        """Stream the run as LangGraph's ``stream`` does (``values``, ``updates``,
        ``custom``, ``messages``, ``debug``, ``tasks``, ``checkpoints``; a list of
        modes gives ``(mode, chunk)``). ``context``: LangGraph's runtime context.
        ``"events"`` (hayata's, as LangGraph's server streams it) gives LangChain's
        stream events, as :meth:`astream_events`."""
        return self._stream(input, config, stream_mode=stream_mode,
                            interrupt_before=interrupt_before,
                            interrupt_after=interrupt_after, subgraphs=subgraphs,
                            durability=durability, context=context, output=False, **kwargs)

    def _stream(self, input: Any, config: Any, *, stream_mode: str | Sequence[str] | None,
                interrupt_before: Sequence[str] | str | None = None,
                interrupt_after: Sequence[str] | str | None = None,
                subgraphs: bool = False, durability: str | None = None,
                context: Any = None, output: bool, **kwargs: Any) -> Iterator[Any]:
        """:meth:`stream`; ``output``: values and updates of the graph's output
        channels only, as LangGraph's ``invoke`` streams them."""
        invocation_id = invocation_of(config)
        config = _merged(self.config, config or {})
        thread = thread_of(config)
        if kwargs:
            raise ConfigError(next(iter(kwargs)), "not supported by hayata_py.langgraph")
        _check_durability(durability)
        mode_list = [stream_mode or "values"] if isinstance(stream_mode, str | None) \
            else list(stream_mode)
        unknown = [m for m in mode_list if m not in _MODES]
        if unknown:
            raise ConfigError("stream_mode", f"{unknown} not supported; use {sorted(_MODES)}")
        settings = self._settings(config, thread, mode_list, interrupt_before, interrupt_after,
                                  output=output)
        settings["subgraphs"] = subgraphs
        settings["context"] = None if context is None else _stored(context, "context")
        events = EVENTS in mode_list
        if events:
            settings["run_id"] = str(config.get("run_id") or uuid.uuid4())
            name = str(config.get("run_name") or compiled(self.path, (), ()).name)
        source = self._source(input, settings, thread, quiet=False,
                              invocation_id=invocation_id)

        def shaped(namespace: tuple[str, ...], mode: str, chunk: Any) -> Any:
            if isinstance(stream_mode, str | None):
                return (namespace, chunk) if subgraphs else chunk
            return (namespace, mode, chunk) if subgraphs else (mode, chunk)

        if events:
            yield shaped((), EVENTS, run_started(name, settings["run_id"], input))
        last_values: Any = None
        for namespace, mode, chunk in source:
            if mode == "values" and not namespace:
                last_values = chunk
            if namespace and not subgraphs:
                continue
            if mode not in mode_list:
                continue
            yield shaped(namespace, mode, chunk)
        if events:
            yield shaped((), EVENTS, run_ended(name, settings["run_id"], last_values))

    def _quiet(self, input: Any, config: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        """What ``invoke`` needs of a run: its interrupts, then its final values,
        from a run that does not stream (one message to the agent and back)."""
        settings, thread = self._quiet_settings(config, **kwargs)
        for _, mode, chunk in self._source(input, settings, thread, quiet=True):
            yield mode, chunk

    def _quiet_settings(self, config: Any, *,
                        interrupt_before: Sequence[str] | str | None = None,
                        interrupt_after: Sequence[str] | str | None = None,
                        durability: str | None = None, context: Any = None, **kwargs: Any
                        ) -> tuple[dict[str, Any], str]:
        """The settings and thread of an ``invoke``; a clear error for bad ones."""
        config = _merged(self.config, config or {})
        thread = thread_of(config)
        if kwargs:
            raise ConfigError(next(iter(kwargs)), "not supported by hayata_py.langgraph")
        _check_durability(durability)
        settings = self._settings(config, thread, ["updates", "values"], interrupt_before,
                                  interrupt_after, output=True)
        settings["context"] = None if context is None else _stored(context, "context")
        return settings, thread

    def _new_quiet_run(self, input: Any, config: Any, **kwargs: Any
                       ) -> tuple[dict[str, Any], str] | None:
        """The input and thread of the new run an ``invoke`` starts; None when
        the thread's newest run still runs or a crash left it unfinished (then
        ``invoke`` decides what to do)."""
        settings, thread = self._quiet_settings(config, **kwargs)
        invocations = self.threads.invocations(thread)
        if invocations and invocations[0][1] == "running":
            return None
        return self._new_run(input, settings, thread, invocations), thread

    def _new_run(self, input: Any, settings: dict[str, Any], thread: str,
                 invocations: list[tuple[str, str]]) -> dict[str, Any]:
        """The input of a new run on the thread: from its newest checkpoints."""
        if settings.get("checkpoint_id") or self._history_channels:
            start, prev = self.threads.history(thread), self.threads.latest(thread)[1]
        else:
            start, prev = self.threads.latest(thread, invocations)
        return {"r": settings, "s": start, "prev": prev, "in": _stored(input, "input")}

    def _source(self, input: Any, settings: dict[str, Any], thread: str, *, quiet: bool,
                invocation_id: str | None = None
                ) -> Iterator[tuple[tuple[str, ...], str, Any]]:
        """The run's chunks: a new run, or the thread's unfinished one recovered
        (``invoke(None, config)``), or asked about (``uncertain="interrupt"``).
        ``quiet``: a new run does not stream; its interrupts and final values only.
        ``invocation_id``: a new streamed run's (:func:`invocation_of`)."""
        invocations = self.threads.invocations(thread)
        unfinished = self.threads.unfinished(thread, invocations)
        if unfinished is None and input is None and invocations \
                and invocations[0][1] == "running":
            # a run goes on already (its agent took it up by itself, auto_recover)
            running = invocations[0][0]
            if quiet:
                return self._ended(running, self.agent.wait(running, timeout=self.timeout),
                                   quiet=True)
            return self._carried_on(running)
        if unfinished is None:
            payload = self._new_run(input, settings, thread, invocations)
            if quiet:  # hayata's invoke (many at once wait through the system's receiver)
                run = checked_invoke(payload, thread, "reject")
                assert run.invocation_id is not None
                result = _ref_wait.blocking_wait(self.agent, run.invocation_id,
                                                 check_timeout(self.timeout), run)
                return self._ended(result.invocation_id, result, quiet=True)
            with self._starting:  # a bounded queue of Runs at the agent
                invocation = self.agent.run(payload, subscriber=CALLER, stream=True,
                                            thread=thread, invocation_id=invocation_id)
            return self._follow(invocation)
        asking = self.uncertain == "interrupt"
        if asking and isinstance(input, Command) and input.resume is not None:
            if not answer(self.agent, unfinished, input.resume):
                values = self.get_state({"configurable": {"thread_id": thread}}).values
                return iter([((), "values", values)])
        elif input is not None:
            raise HayataError(
                f"thread {thread!r} has an invocation ({unfinished}) that a crash left "
                "unfinished: invoke(None, config) goes on with it", code="recovery_required",
                invocation_id=unfinished, thread_id=thread)
        try:
            invocation = self.agent.recover(unfinished, subscriber=CALLER, stream=True)
        except RecoveryRejected as exc:
            if exc.code in ("invocation_busy", "nothing_to_recover"):
                # the agent took it up itself meanwhile (auto_recover)
                if quiet:
                    return self._ended(unfinished, self.agent.wait(unfinished,
                                                                   timeout=self.timeout),
                                       quiet=True)
                return self._carried_on(unfinished)
            if asking and exc.code == "task_execution_uncertain":
                records = uncertain_records(self.agent, unfinished)
                values = self.get_state({"configurable": {"thread_id": thread}}).values
                return interrupt_chunks(unfinished, records, values)
            raise self._uncertain(exc, thread) from exc
        return self._follow(invocation)

    def _settings(self, config: Any, thread: str, modes: list[str],
                  interrupt_before: Sequence[str] | str | None,
                  interrupt_after: Sequence[str] | str | None, *, output: bool
                  ) -> dict[str, Any]:
        configurable = dict(config.get("configurable") or {})
        checkpoint_id = configurable.get("checkpoint_id")
        extra = {k: v for k, v in configurable.items() if k not in _INTERNAL}
        limit = config.get("recursion_limit", 25)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError("recursion_limit", f"must be an int >= 1, got {limit!r}")

        def points(value: Sequence[str] | str | None) -> Any:
            return "*" if value == "*" else list(value or ())

        return {"graph": self.path, "thread": thread,
                "configurable": _stored(extra, "config['configurable']"),
                "recursion_limit": limit, "modes": sorted(set(modes) | {"values", "updates"}),
                "interrupt_before": points(interrupt_before or self.interrupt_before),
                "interrupt_after": points(interrupt_after or self.interrupt_after),
                "checkpoint_id": checkpoint_id, "raise_nodes": self.raise_nodes,
                "output": output, "store": self.store}

    def _follow(self, invocation: str) -> Iterator[tuple[tuple[str, ...], str, Any]]:
        """The chunks of a run this caller streams, as they come, then its end."""
        result: AgentResult | None = None

        def events() -> Iterator[AgentEvent]:
            nonlocal result
            for message in self._messages(invocation):
                if isinstance(message, AgentResult):
                    result = message
                    return
                yield message

        yield from _partial_chunks(events())
        if result is None:
            raise HayataError(f"invocation {invocation} ended without a result", code="no_result")
        yield from self._ended(invocation, result, quiet=False)

    def _carried_on(self, invocation: str) -> Iterator[tuple[tuple[str, ...], str, Any]]:
        """The chunks of a run its agent carries on by itself (``auto_recover``
        after a crash: it streams into the event log with no live subscriber),
        from where it last started, read from the log as they are stored; then
        its end."""
        start = max((e.sequence for e in self.agent.events(invocation)
                     if e.type == "invocation_started"), default=0)
        # a step cut off with its lead task done: the lead does not run again, and
        # its chunks came before the start or never (not yet stored at the crash)
        yield from _partial_chunks(self.agent.events(
            invocation, after=start, follow=True, timeout=self.timeout),
            self._leads_done(invocation))
        yield from self._ended(invocation, self.agent.wait(invocation, timeout=self.timeout),
                               quiet=False)

    def _leads_done(self, invocation: str) -> set[str]:
        """The steps of ``invocation`` whose lead task is recorded completed: it
        does not run again, so its step's other chunks do not wait for it."""
        store = self.agent.system.store
        if store is None:
            return set()
        return {task.execution_id for task in store.get_tasks(invocation)
                if task.status == "completed" and task.branch_index == 0
                and isinstance(task.input, dict) and task.input.get("lead") == task.node_id}

    def _ended(self, invocation: str, result: AgentResult, *, quiet: bool
               ) -> Iterator[tuple[tuple[str, ...], str, Any]]:
        """The chunks of the run's last decision, then its end as LangGraph's:
        the node's exception, ``GraphRecursionError``. ``quiet``: its interrupts
        and final values only."""
        if not result.ok:
            error = result.error
            code = error.code if error is not None else "failed"
            raise HayataError(f"the graph's run failed: {code}: "
                              f"{error.message if error else ''}", code=code,
                              invocation_id=invocation,
                              **(dict(error.details) if error is not None else {}))
        final: dict[str, Any] = result.result
        chunks: list[tuple[tuple[str, ...], str, Any]] = load_value(final["c"])
        if quiet:
            interrupts = load_value(final["ints"]) if final.get("ints") else []
            if interrupts:
                yield ((), "updates", {INTERRUPT: tuple(interrupts)})
            if final["status"] not in ("error", "out_of_steps"):
                yield ((), "values", load_value(final["out"]))
        else:
            yield from chunks
        if final["status"] == "error":
            raise load_value(final["err"])
        if final["status"] == "out_of_steps":
            raise GraphRecursionError(
                "Recursion limit reached without hitting a stop condition. You can increase "
                "the limit by setting the `recursion_limit` config key.")

    # -- asyncio ---------------------------------------------------------------------

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """:meth:`invoke` from an event loop. On an ``AsyncAgentSystem`` a new
        run is awaited as hayata's own async ``invoke`` (no thread is held while
        it runs, so many runs at once are not held back by a thread pool);
        other calls run :meth:`invoke` on a thread."""
        if self.async_system is not None and kwargs.get("stream_mode", "values") == "values":
            options = {k: v for k, v in kwargs.items() if k != "stream_mode"}
            planned = await self.async_system.call(self._new_quiet_run, input, config,
                                                   **options)
            if planned is not None:
                payload, thread = planned
                result = await AsyncAgentRef(self.async_system, self.agent).invoke(
                    payload, thread=thread, timeout=self.timeout)
                return _values((mode, chunk) for _, mode, chunk in
                               self._ended(result.invocation_id, result, quiet=True))
        return await asyncio.to_thread(self.invoke, input, config, **kwargs)

    async def astream(self, input: Any, config: Any = None, **kwargs: Any
                      ) -> AsyncIterator[Any]:
        """:meth:`stream` from an event loop: chunks as they come, the same errors."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def pump() -> None:
            try:
                for chunk in self.stream(input, config, **kwargs):
                    if stop.is_set():
                        return
                    loop.call_soon_threadsafe(queue.put_nowait, ("chunk", chunk))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            else:
                loop.call_soon_threadsafe(queue.put_nowait, ("end", None))

        worker = threading.Thread(target=pump, name="hayata-langgraph-astream", daemon=True)
        worker.start()
        try:
            while True:
                kind, item = await queue.get()
                if kind == "chunk":
                    yield item
                elif kind == "error":
                    raise item
                else:
                    return
        finally:
            stop.set()

    async def astream_events(self, input: Any, config: Any = None, *, version: str = "v2",
                             **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        """LangChain's stream events of the run (version ``"v2"`` only), as
        LangGraph's ``astream_events`` gives them: the graph's
        ``on_chain_start``, each node's, chat model's and tool's events as its
        task makes them, the graph's ``on_chain_end``. ``kwargs``: those of
        :meth:`stream` but ``stream_mode``."""
        if version != "v2":
            raise ConfigError("version", f"only \"v2\" stream events are given, got "
                              f"{version!r}")
        if "stream_mode" in kwargs:
            raise ConfigError("stream_mode", "astream_events streams events only; use "
                              "astream(..., stream_mode=[\"events\", ...]) for more modes")
        root: dict[str, Any] | None = None
        async for mode, chunk in self.astream(input, config, stream_mode=[EVENTS, "updates"],
                                              **kwargs):
            if mode == EVENTS:
                root = root or chunk
                yield chunk
            elif root is not None:  # the graph's own output: each superstep's updates
                yield {**root, "event": "on_chain_stream", "data": {"chunk": chunk}}

    async def aget_state(self, config: Any, *, subgraphs: bool = False) -> StateSnapshot:
        """:meth:`get_state` from an event loop."""
        return await asyncio.to_thread(self.get_state, config, subgraphs=subgraphs)

    async def aupdate_state(self, config: Any, values: Any, as_node: str | None = None
                            ) -> Any:
        """:meth:`update_state` from an event loop."""
        return await asyncio.to_thread(self.update_state, config, values, as_node)

    async def acancel(self, config: Any, *, rollback: bool = False) -> str | None:
        """:meth:`cancel` from an event loop."""
        return await asyncio.to_thread(self.cancel, config, rollback=rollback)

    def _messages(self, invocation: str) -> Iterator[AgentEvent | AgentResult]:
        """The run's events then its result; when nothing comes for a second,
        ask whether anything still runs it (a dead agent: ``recovery_required``,
        a dead system: ``no_system``), then again after twice as long a silence,
        up to every ``SILENCE_CHECK_MAX`` s (a thousand long runs do not ask
        their agent a thousand times a second); ``TimeoutError`` after
        ``timeout`` s of silence."""
        heard = time.monotonic()
        ended: AgentResult | None = None  # its agent answered its result already
        filed = False
        silence = 1.0
        while True:
            try:
                for message in self.agent.messages(invocation,
                                                   timeout=1.0 if ended else silence):
                    heard, ended, silence = time.monotonic(), None, 1.0
                    yield message
                    if isinstance(message, AgentResult):
                        return
            except TimeoutError:
                if ended is not None:
                    # The invocation has ended (its end is in the store) and the
                    # live channel still lacks part of its stream (a message lost
                    # under load): the rest comes from the store's event log;
                    # with no log to read (or still nothing), its result ends it.
                    if filed or not file_ended(self.agent, invocation):
                        yield ended
                        return
                    filed, ended = True, None
                    continue
                try:
                    # a probe, on this thread's endpoint (never the receiver): its
                    # tell waits until the agent takes it in, so the probes of a
                    # thousand silent followers go at the agent's pace (through
                    # the receiver, 1,000 streams of `hayata serve` took 2-3x the CPU)
                    ended = _ref_wait.wait(self.agent, invocation, 0.5, None)
                except TimeoutError:
                    if time.monotonic() - heard > self.timeout:
                        raise
                    silence = min(2 * silence, SILENCE_CHECK_MAX)

    # -- the thread's checkpoints ----------------------------------------------------

    def _checkpoints(self, thread: str, config: Any, *, live: bool = False) -> bytes | None:
        """What a read of ``config`` needs: the newest checkpoints, or the whole
        history for a ``checkpoint_id`` or a graph with history channels
        (``live``: with a running run's completed supersteps)."""
        configurable = config.get("configurable") or {}
        if configurable.get("checkpoint_id") or self._history_channels:
            return self.threads.history(thread, live=live)
        return self.threads.latest(thread, live=live)[0]

    def _graph(self, snapshot: bytes | None) -> CompiledStateGraph[Any, Any, Any, Any]:
        def points(value: Sequence[str] | str | None) -> Any:
            return "*" if value == "*" else (list(value) if value else None)

        return builder_of(self.path).compile(
            checkpointer=load_saver(snapshot), interrupt_before=points(self.interrupt_before),
            interrupt_after=points(self.interrupt_after))

    def uncertain_tasks(self, thread_id: str) -> list[dict[str, Any]]:
        """The tasks a crash left uncertain that ``thread_id``'s unfinished run
        waits on: each one's ``node``, ``task_id`` and the ``answers`` that go on
        (``Command(resume={...})`` with one of their keys). Empty when nothing
        waits on a person."""
        unfinished = self.threads.unfinished(thread_id)
        if unfinished is None:
            return []
        return [{"node": record.node_id, "task_id": record.task_id, "answers": dict(ANSWERS)}
                for record in uncertain_records(self.agent, unfinished)]

    def resolve_uncertain(self, thread_id: str, task_id: str, answer: dict[str, Any]
                          ) -> list[dict[str, Any]]:
        """Answer one task a crash left uncertain in ``thread_id``'s unfinished
        run, as the interrupt's answers say: ``{"completed": update}`` (the node
        did its work and returned ``update``) or ``{"rerun": True}``. Nothing
        runs; ``invoke(None, config)`` goes on once no task is left uncertain.
        Returns the tasks still uncertain (as :meth:`uncertain_tasks`).
        ``HayataError``: ``task_not_found`` (the thread has no task
        ``task_id``), ``task_not_uncertain`` (it has an outcome, or its run
        ended); ``ConfigError`` (``answer``, ``completed``) for an answer that
        cannot be recorded (nothing is)."""
        if not isinstance(answer, dict) or len({"completed", "rerun"} & set(answer)) != 1 \
                or ("rerun" in answer and answer["rerun"] is not True):
            raise ConfigError("answer", 'must be {"completed": update} or {"rerun": True}, '
                              f"got {answer!r:.200}")
        store = self.agent.system.store
        record = store.get_task(task_id) if store is not None else None
        invocations = self.threads.invocations(thread_id)
        if record is None or record.invocation_id not in {i for i, _ in invocations}:
            raise HayataError(f"thread {thread_id!r} has no task {task_id!r}",
                              code="task_not_found", task_id=task_id, thread_id=thread_id)
        unfinished = self.threads.unfinished(thread_id, invocations)
        waiting = uncertain_records(self.agent, unfinished) if unfinished else []
        found = next((r for r in waiting if r.task_id == task_id), None)
        if found is None:
            raise HayataError(
                f"task {task_id} (node {record.node_id!r}) of thread {thread_id!r} is not "
                f"uncertain: it is {record.status}"
                + ("" if record.invocation_id == unfinished else ", its run has ended")
                + "; only a task a crash left started with no outcome is answered by hand",
                code="task_not_uncertain", task_id=task_id, thread_id=thread_id,
                status=record.status)
        record_answer(self.agent, found, answer)
        return self.uncertain_tasks(thread_id)

    def abandon_unfinished(self, thread_id: str) -> str:
        """End ``thread_id``'s run a crash left unfinished (``AgentRef.abandon``):
        its uncertain tasks are not run or answered; the thread keeps the
        progress its completed nodes made. Returns the invocation id.
        ``HayataError("nothing_to_abandon")`` when no run of the thread is unfinished."""
        unfinished = self.threads.unfinished(thread_id)
        if unfinished is None:
            raise HayataError(f"thread {thread_id!r} has no run a crash left unfinished",
                              code="nothing_to_abandon", thread_id=thread_id)
        self.agent.abandon(unfinished)
        return unfinished

    def get_state(self, config: Any, *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's state as LangGraph's ``get_state`` gives it (during a
        run: at the last superstep it completed)."""
        config = _merged(self.config, config)
        thread = thread_of(config)
        return self._graph(self._checkpoints(thread, config, live=True)).get_state(
            config, subgraphs=subgraphs)

    def get_state_history(self, config: Any, *, filter: dict[str, Any] | None = None,
                          before: Any = None, limit: int | None = None
                          ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints, newest first, as LangGraph gives them."""
        config = _merged(self.config, config)
        thread = thread_of(config)
        graph = self._graph(self.threads.history(thread, live=True))
        yield from graph.get_state_history(config, filter=filter, before=before, limit=limit)

    def cancel(self, config: Any, *, rollback: bool = False) -> str | None:
        """Stop the thread's running run, as LangGraph's server cancels a run:
        the node running is stopped (its task recorded ``cancelled``), and the
        thread keeps the supersteps the run completed (``get_state`` shows the
        last one, with the stopped node still to run; the next run starts from
        it). ``rollback``: the thread goes back to where it was before the run,
        as if it never ran (its checkpoints are left out of the thread's state
        and history).

        Returns the id of the invocation stopped; None when nothing ran on the
        thread (a run that has ended is left as it is). Raises ``HayataError``
        ``not_running`` when a crash left the thread's run unfinished
        (``invoke(None, config)`` goes on with it, ``abandon`` ends it)."""
        config = _merged(self.config, config)
        thread = thread_of(config)
        invocations = self.threads.invocations(thread)
        if not invocations or invocations[0][1] != "running":
            return None
        invocation = invocations[0][0]
        result = self.agent.cancel(invocation, timeout=self.timeout)
        if result.status != "cancelled":
            return None
        if rollback:
            self._forget(thread, invocation)
        return invocation

    def roll_back(self, config: Any, invocation_id: str) -> None:
        """Put the thread back where it was before its run ``invocation_id``
        (which has ended: stopped elsewhere, e.g. by another server's system),
        as ``cancel(rollback=True)`` does for a run it stops."""
        self._forget(thread_of(_merged(self.config, config)), invocation_id)

    def _forget(self, thread: str, invocation: str) -> None:
        """Record the thread's checkpoints from before ``invocation`` as its
        newest: a copy of those the run before it made, linked to that run's
        own predecessor (none at all if it was the thread's first)."""
        _, prev = self.threads.chain_link(invocation, whole=False)
        made, before = self.threads.chain_link(prev) if prev is not None else (None, None)
        payload = {"op": "put", "s": made if made is not None else dump_saver(load_saver(None)),
                   "prev": before}
        recorded = self.agent.wait(self.agent.run(payload, thread=thread), timeout=self.timeout)
        if not recorded.ok:
            raise HayataError("the rollback could not be recorded", code="update_failed",
                              invocation_id=recorded.invocation_id)

    def update_state(self, config: Any, values: Any, as_node: str | None = None) -> Any:
        """Write ``values`` as if ``as_node`` had, as LangGraph's ``update_state``;
        the new checkpoint is recorded as the thread's latest."""
        config = _merged(self.config, config)
        thread = thread_of(config)
        base = self._checkpoints(thread, config)
        _, prev = self.threads.latest(thread)
        graph = self._graph(base)
        since = head_id(load_saver(base), thread)
        new_config = graph.update_state(config, values, as_node=as_node)
        saver: Any = graph.checkpointer
        payload = {"op": "put", "s": dump_saver(trim_saver(saver, thread, since)), "prev": prev}
        invocation = self.agent.run(payload, thread=thread)
        result = self.agent.wait(invocation, timeout=self.timeout)
        if not result.ok:
            raise HayataError("update_state could not be recorded", code="update_failed",
                              invocation_id=invocation)
        return new_config

    def get_graph(self, config: Any = None, *, xray: int | bool = False) -> Any:
        """The graph's drawable structure (``draw_mermaid()``), from LangGraph."""
        return builder_of(self.path).compile().get_graph(config, xray=xray)

    def _uncertain(self, exc: RecoveryRejected, thread: str) -> HayataError:
        if exc.code != "task_execution_uncertain":
            return exc
        return TaskUncertain.of(exc, thread, self.agent.id)

    def __repr__(self) -> str:
        return f"HayataGraph({self.path!r}, agent={self.agent.id!r})"


def _partial_chunks(events: Iterable[AgentEvent], opened: set[str] | None = None
                    ) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """A run's chunks in LangGraph's order from its ``node_partial_result``
    events: each step's lead task first gives the chunks of the superstep
    before it; a step's other chunks wait for those (``opened``: the steps
    whose lead gave them already)."""
    opened = set(opened or ())
    held: dict[str, list[Any]] = defaultdict(list)
    for event in events:
        if not isinstance(event, AgentEvent) or event.type != "node_partial_result":
            continue
        execution = event.data["execution_id"]
        partial = event.data["result"]
        if "p" in partial:
            opened.add(execution)
            yield from load_value(partial["p"])
            yield from held.pop(execution, [])
        elif execution in opened:
            yield load_value(partial["x"])
        else:
            held[execution].append(load_value(partial["x"]))
