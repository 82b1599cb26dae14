"""The ``debug``, ``tasks`` and ``checkpoints`` stream modes against LangGraph's
own: the same chunks in the same order, of the same shape (keys and types;
ids and timestamps differ, each runtime makes its own), and the values in
them the same. And ``durability``: LangGraph's values are taken, others
refused; whatever it is, a run going on shows in ``get_state``."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Interrupt

import hayata_py as hy
from hayata_py import langgraph as hylg
from tests.helpers import eventually, in_thread
from tests.lgcompat import graphs

pytestmark = pytest.mark.timeout(120)

MODES = ["debug", "tasks", "checkpoints"]



def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


_MADE = {"id", "checkpoint_id", "timestamp", "thread_id"}
"""Fields each runtime makes its own of."""


def _shape(value: Any, key: str = "") -> Any:
    """``value`` with what each runtime makes its own (ids, timestamps) as
    their type; everything else kept, so values compare too."""
    if key in _MADE:
        return type(value).__name__
    if isinstance(value, Interrupt):
        return ("Interrupt", _shape(value.value))
    if isinstance(value, dict):
        return {k: _shape(v, k) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_shape(v) for v in value])
    if isinstance(value, Exception):
        return (type(value).__name__, str(value))
    return value


def _run(app: Any, inputs: list[Any]) -> list[Any]:
    """The ``(mode, chunk)`` stream of ``inputs`` run in turn on one thread, shaped;
    a run's exception as its last item."""
    config, out = _config(), []
    for given in inputs:
        try:
            for mode, chunk in app.stream(given, config, stream_mode=MODES):
                out.append((mode, _shape(chunk)))
        except Exception as exc:  # noqa: BLE001 - compared with LangGraph's own
            out.append(("raised", type(exc).__name__))
    return out


def _is_task_result(item: Any) -> bool:
    mode, chunk = item
    return isinstance(chunk, dict) and (
        (mode == "tasks" and "result" in chunk)
        or (mode == "debug" and chunk.get("type") == "task_result"))


def _result_order_free(items: list[Any]) -> list[Any]:
    """``items`` with each run of consecutive task results (``tasks`` results
    and ``debug`` ``task_result``s) sorted: the tasks of one superstep end in
    the order they happen to finish, in LangGraph as here."""
    out: list[Any] = []
    run: list[Any] = []
    for item in [*items, None]:
        if item is not None and _is_task_result(item):
            run.append(item)
            continue
        out.extend(sorted(run, key=repr))
        run = []
        if item is not None:
            out.append(item)
    return out


CASES = [
    ("sequence", [{"text": "", "steps": []}]),
    ("fanout", [{"topic": "t"}]),
    ("mapreduce", [{"subjects": ["cats", "dogs"]}]),
    ("approval", [{"question": "q", "answers": []}, Command(resume="ada"),
                  Command(resume="36")]),
    ("flaky", [{"steps": []}]),
]


@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[c[0] for c in CASES])
def test_debug_tasks_checkpoints_as_langgraphs(system: hy.AgentSystem, name: str,
                                               inputs: list[Any]) -> None:
    builder = getattr(graphs, name)
    reference = builder.compile(checkpointer=InMemorySaver())
    app = hylg.compile(builder, system)
    ours, theirs = _run(app, inputs), _run(reference, inputs)
    assert [kind for kind, _ in ours] == [kind for kind, _ in theirs]
    assert _result_order_free(ours) == _result_order_free(theirs)
    kinds = {mode for mode, _ in theirs}
    assert kinds >= {"debug", "tasks", "checkpoints"}, kinds
    if name == "flaky":
        assert ours[-1] == ("raised", "FlakyError")


def test_each_mode_alone_and_debug_kinds(system: hy.AgentSystem) -> None:
    reference = graphs.sequence.compile(checkpointer=InMemorySaver())
    app = hylg.compile(graphs.sequence, system)
    given = {"text": "", "steps": []}
    for mode in MODES:
        ours = [_shape(c) for c in app.stream(given, _config(), stream_mode=mode)]
        assert ours == [_shape(c) for c in reference.stream(given, _config(),
                                                            stream_mode=mode)]
    debug = list(app.stream(given, _config(), stream_mode="debug"))
    assert [c["type"] for c in debug] == ["checkpoint", "checkpoint"] + \
        ["task", "task_result", "checkpoint"] * 3


def test_durability_values_taken_others_refused(system: hy.AgentSystem) -> None:
    app = hylg.compile(graphs.sequence, system)
    given = {"text": "", "steps": []}
    for durability in ("sync", "async", "exit"):
        config = _config()
        assert app.invoke(given, config, durability=durability)["text"] == "abc"
        # hayata recorded every superstep whatever the mode: the history is whole
        assert len(list(app.get_state_history(config))) == 5
        assert list(app.stream(given, _config(), stream_mode="updates",
                               durability=durability))[-1] == \
            {"c": {"text": "abc", "steps": ["c"]}}
    thread = _config()
    for call in (lambda: app.invoke(given, thread, durability="never"),
                 lambda: list(app.stream(given, thread, durability="always"))):
        with pytest.raises(hy.ConfigError, match="durability") as refused:
            call()
        assert refused.value.details["field"] == "durability"
        assert "sync" in str(refused.value)
    assert app.get_state(thread).values == {}  # nothing ran


def test_get_state_of_a_run_going_on_shows_the_superstep_it_is_in(
        system: hy.AgentSystem) -> None:
    """As LangGraph's checkpoints show a run mid-way: the last superstep's
    values, the node running as ``next``; a new run still starts from the end."""
    app = hylg.compile(graphs.slow, system, id="slow-live")
    config = _config()
    run = in_thread(lambda: app.invoke({"steps": []}, config))
    try:
        eventually(lambda: app.get_state(config).next == ("b",), timeout=60,
                   message="node b seen running")
        assert app.get_state(config).values == {"steps": ["a"]}
        assert [s.next for s in app.get_state_history(config)][:2] == [("b",), ("a",)]
    finally:
        Path(os.environ["LGCOMPAT_DIR"], "release").touch()
    assert run.result(timeout=60) == {"steps": ["a", "b", "c"]}
    assert app.get_state(config).next == ()
