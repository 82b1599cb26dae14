"""The same graphs, the same inputs: LangGraph's own compiled graph (with
``InMemorySaver``) and ``hylg.compile`` on a real AgentSystem must give the same
final values, the same ``updates`` and ``values`` streams and the same
``get_state_history`` values."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.types import Command, Interrupt

import hayata_py as hy
from hayata_py import langgraph as hylg
from tests.lgcompat import graphs

pytestmark = pytest.mark.timeout(120)



def _norm(value: Any) -> Any:
    """Values with message and interrupt ids blanked (each runtime makes fresh ones)."""
    if isinstance(value, BaseMessage):
        return value.model_copy(update={"id": None})
    if isinstance(value, Interrupt):
        return ("Interrupt", _norm(value.value))
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_norm(v) for v in value)
    return value


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def _pair(system: hy.AgentSystem, name: str, **compile_args: Any) -> tuple[Any, Any]:
    builder = getattr(graphs, name)
    reference = builder.compile(checkpointer=InMemorySaver(), **compile_args)
    return reference, hylg.compile(builder, system, **compile_args)


def _stream(app: Any, input: Any, config: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """(values chunks in order, updates chunks in order of their superstep)."""
    values: list[Any] = []
    updates: list[Any] = []
    for mode, chunk in app.stream(input, config, stream_mode=["updates", "values"]):
        (values if mode == "values" else updates).append(_norm(chunk))
    return values, updates


def _same_updates(ours: list[Any], theirs: list[Any]) -> None:
    # tasks of one superstep report in the order they finish, in both runtimes
    assert sorted(map(repr, ours)) == sorted(map(repr, theirs))


def _history(app: Any, config: dict[str, Any]) -> list[Any]:
    return [_norm(s.values) for s in app.get_state_history(config)]


CASES = [
    ("sequence", {"text": "", "steps": []}),
    ("branch", {"n": 20}),
    ("branch", {"n": 3}),
    ("fanout", {"topic": "t"}),
    ("mapreduce", {"subjects": ["cats", "dogs", "owls"]}),
    ("goto", {"value": 2}),
    ("goto", {"value": 3}),
    ("chat", {"messages": [("user", "weather in Paris?")]}),
    ("schemas", {"question": "why"}),
]


@pytest.mark.parametrize(("name", "input"), CASES, ids=[f"{n}-{i}" for i, (n, _) in
                                                         enumerate(CASES)])
def test_same_run_as_langgraph(system: hy.AgentSystem, name: str, input: Any) -> None:
    reference, app = _pair(system, name)
    mine, theirs = _config(), _config()
    ours_values, ours_updates = _stream(app, input, mine)
    their_values, their_updates = _stream(reference, input, theirs)
    assert ours_values == their_values
    _same_updates(ours_updates, their_updates)
    assert _norm(app.get_state(mine).values) == _norm(reference.get_state(theirs).values)
    assert _history(app, mine) == _history(reference, theirs)
    # a second turn on the same thread starts from the first one's state
    assert _norm(app.invoke(input, mine)) == _norm(reference.invoke(input, theirs))
    assert _history(app, mine) == _history(reference, theirs)


def test_custom_stream_between_updates(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "sequence")
    modes = ["updates", "custom"]
    input = {"text": "", "steps": []}
    ours = list(app.stream(input, _config(), stream_mode=modes))
    theirs = list(reference.stream(input, _config(), stream_mode=modes))
    assert ours == theirs
    assert ("custom", {"progress": "b"}) in ours


def test_interrupt_twice_in_one_node(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "approval")
    mine, theirs = _config(), _config()
    steps: list[Any] = [{"question": "who?", "answers": []}, Command(resume="ada"),
                        Command(resume=36)]
    for step in steps:
        ours = app.invoke(step, mine)
        assert _norm(ours) == _norm(reference.invoke(step, theirs))
    assert ours["answers"] == ["ada", "36"] and ours["done"] is True
    ours_state, their_state = app.get_state(mine), reference.get_state(theirs)
    assert ours_state.next == their_state.next == ()
    assert _history(app, mine) == _history(reference, theirs)


def test_interrupt_pauses_with_pending_task(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "approval")
    mine, theirs = _config(), _config()
    ours = app.invoke({"question": "who?", "answers": []}, mine)
    theirs_out = reference.invoke({"question": "who?", "answers": []}, theirs)
    assert [i.value for i in ours["__interrupt__"]] == \
        [i.value for i in theirs_out["__interrupt__"]]
    state = app.get_state(mine)
    assert state.next == ("ask",)
    assert [i.value for i in state.interrupts] == [{"ask": "name?", "q": "who?"}]


def test_static_breakpoint_and_resume_with_none(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "sequence", interrupt_before=["b"])
    mine, theirs = _config(), _config()
    input = {"text": "", "steps": []}
    assert app.invoke(input, mine) == reference.invoke(input, theirs)
    assert app.get_state(mine).next == reference.get_state(theirs).next == ("b",)
    assert app.invoke(None, mine) == reference.invoke(None, theirs)
    assert _history(app, mine) == _history(reference, theirs)


def test_recursion_limit(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "forever")
    mine, theirs = _config(), _config()
    for limited in (mine, theirs):
        limited["recursion_limit"] = 4
    with pytest.raises(GraphRecursionError):
        reference.invoke({"count": 0}, theirs)
    with pytest.raises(GraphRecursionError):
        app.invoke({"count": 0}, mine)


def test_a_long_run_carries_its_state_not_its_steps(system: hy.AgentSystem) -> None:
    """Each step carries the checkpoints the decision before it made, not all
    the run's so far: a 30-step loop's step data does not grow with the
    steps, and the run's whole history is still LangGraph's."""
    reference, app = _pair(system, "forever")
    mine, theirs = _config(), _config()
    for config in (mine, theirs):
        config["recursion_limit"] = 100
    assert app.invoke({"count": 970}, mine) == reference.invoke({"count": 970}, theirs)
    history = _history(app, mine)
    assert history == _history(reference, theirs) and len(history) > 30
    [(invocation, _)] = app.threads.invocations(mine["configurable"]["thread_id"])
    sizes = [len(record.input["s"]) for record, _ in app.agent.tasks(invocation)]
    assert len(sizes) == 30
    assert max(sizes) < 2 * min(sizes), sizes


def test_a_delta_channel_graph_across_runs(system: hy.AgentSystem) -> None:
    """A ``DeltaChannel`` rebuilds its value from the writes of the thread's
    earlier checkpoints: two runs on one thread give LangGraph's values and
    history, the second run's list built on the first's."""
    reference, app = _pair(system, "deltas")
    mine, theirs = _config(), _config()
    for input in ({"items": ["a"], "left": 3}, {"items": ["b"], "left": 2}):
        assert app.invoke(input, mine) == reference.invoke(input, theirs)
    assert app.get_state(mine).values["items"] == ["a", "i1", "i2", "i3", "b", "i5", "i6"]
    assert _history(app, mine) == _history(reference, theirs)


def test_update_state_and_fork(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "sequence")
    mine, theirs = _config(), _config()
    input = {"text": "", "steps": []}
    app.invoke(input, mine)
    reference.invoke(input, theirs)
    app.update_state(mine, {"text": "edited"}, as_node="c")
    reference.update_state(theirs, {"text": "edited"}, as_node="c")
    assert app.get_state(mine).values == reference.get_state(theirs).values
    assert _history(app, mine) == _history(reference, theirs)
    # fork: run again from the checkpoint before node b ran
    ours_past = next(s for s in app.get_state_history(mine) if s.next == ("b",))
    their_past = next(s for s in reference.get_state_history(theirs) if s.next == ("b",))
    assert app.invoke(None, ours_past.config) == reference.invoke(None, their_past.config)
    assert _history(app, mine) == _history(reference, theirs)


def test_refused_before_anything_starts(system: hy.AgentSystem) -> None:
    before = system.agents()
    with pytest.raises(hy.ConfigError, match="checkpointer"):
        hylg.compile(graphs.sequence, system, checkpointer=InMemorySaver())
    with pytest.raises(hy.ConfigError, match="module level"):
        from langgraph.graph import StateGraph
        local = StateGraph(graphs.SeqState)
        local.add_node("a", graphs.seq_a)
        local.set_entry_point("a")
        hylg.compile(local, system)
    with pytest.raises(hy.ConfigError, match="does not import"):
        hylg.compile("tests.lgcompat.no_such_module:graph", system)
    assert system.agents() == before
    app = hylg.compile(graphs.sequence, system)
    bad: list[Any] = [None, {}, {"configurable": {}}, {"configurable": {"thread_id": ""}},
                      {"configurable": {"thread_id": 7}},
                      {"configurable": {"thread_id": "x" * 257}}]
    for config in bad:
        with pytest.raises(hy.ConfigError, match="thread_id"):
            app.invoke({"text": "", "steps": []}, config)
    with pytest.raises(hy.ConfigError, match="input"):
        app.invoke({"text": "", "steps": [lambda: None]}, _config())
    with pytest.raises(hy.ConfigError, match="configurable"):
        app.invoke({"text": "", "steps": []},
                   {"configurable": {"thread_id": "t", "hook": lambda: None}})
    with pytest.raises(hy.HayataError) as nothing:
        app.agent.thread("t")   # nothing ran on it
    assert nothing.value.code == "not_found"


def test_graph_by_path_and_drawing(system: hy.AgentSystem) -> None:
    app = hylg.compile("tests.lgcompat.graphs:branch", system, id="branch-by-path")
    assert app.invoke({"n": 1}, _config()) == {"n": 2, "route": "small"}
    assert "classify" in app.get_graph().draw_mermaid()


def counts(name: str) -> int:
    path = Path(os.environ["LGCOMPAT_DIR"], f"{name}.runs")
    return len(path.read_text()) if path.exists() else 0


def test_messages_mode_tokens(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "talker")
    input = {"messages": [("user", "hi")]}

    def tokens(stream: Any) -> list[tuple[str, str]]:
        return [(chunk.content, meta["langgraph_node"]) for chunk, meta in stream]

    ours = tokens(app.stream(input, _config(), stream_mode="messages"))
    theirs = tokens(reference.stream(input, _config(), stream_mode="messages"))
    assert ours == theirs
    assert "".join(content for content, _ in ours) == "hello there friend"


def test_node_error_then_resume(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "flaky")
    mine, theirs = _config(), _config()
    ok = Path(os.environ["LGCOMPAT_DIR"], "flaky.ok")
    ok.unlink(missing_ok=True)
    with pytest.raises(graphs.FlakyError, match="not ready"):
        reference.invoke({"steps": []}, theirs)
    with pytest.raises(graphs.FlakyError, match="not ready"):
        app.invoke({"steps": []}, mine)
    ours_state, their_state = app.get_state(mine), reference.get_state(theirs)
    assert ours_state.next == their_state.next == ("b",)
    assert [(t.name, t.error) for t in ours_state.tasks] == \
        [(t.name, t.error) for t in their_state.tasks]
    assert ours_state.values == their_state.values
    ok.write_text("ok")
    try:
        ours, theirs_out = app.invoke(None, mine), reference.invoke(None, theirs)
    finally:
        ok.unlink()
    assert sorted(ours["steps"]) == sorted(theirs_out["steps"]) == ["a", "b", "side"]


def test_sends_beside_a_plain_edge_in_one_superstep(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "mixed")
    mine, theirs = _config(), _config()
    input = {"subjects": ["x", "y"], "jokes": []}
    ours_values, ours_updates = _stream(app, input, mine)
    their_values, their_updates = _stream(reference, input, theirs)
    assert [sorted(v.get("jokes", [])) for v in ours_values] == \
        [sorted(v.get("jokes", [])) for v in their_values]
    _same_updates(ours_updates, their_updates)
    assert app.get_state(mine).values["best"] == reference.get_state(theirs).values["best"]


def test_command_as_input(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "goto")
    mine, theirs = _config(), _config()
    assert app.invoke({"value": 1}, mine) == reference.invoke({"value": 1}, theirs)
    command = Command(update={"value": 7}, goto="left")
    assert app.invoke(command, mine) == reference.invoke(command, theirs)
    assert _history(app, mine) == _history(reference, theirs)


def _runs(key: str) -> int:
    path = Path(os.environ["LGCOMPAT_DIR"], f"{key}.runs")
    return len(path.read_text()) if path.exists() else 0


def test_retry_policy_is_hayatas_durable_retry(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "retrying")
    assert reference.invoke({"tries": 1}, _config()) == {"tries": 1001}
    assert _runs("shaky-1") == 3
    mine = _config()
    assert app.invoke({"tries": 2}, mine) == {"tries": 1002}
    assert _runs("shaky-2") == 3
    thread = app.agent.thread(mine["configurable"]["thread_id"])
    retries = [e for inv, _ in thread.invocations for e in app.agent.events(inv)
               if e.type == "node_retrying"]
    assert [e.data["attempt"] for e in retries] == [2, 3]


def test_retry_policy_exhausted_raises_the_nodes_error(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "exhausted")
    with pytest.raises(ConnectionError):
        reference.invoke({"tries": 3}, _config())
    assert _runs("shaky-3") == 2
    with pytest.raises(ConnectionError):
        app.invoke({"tries": 4}, _config())
    assert _runs("shaky-4") == 2


def test_with_config_and_refused_call_options(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "forever")
    bound = app.with_config(recursion_limit=3)
    with pytest.raises(GraphRecursionError):
        bound.invoke({"count": 0}, _config())
    with pytest.raises(GraphRecursionError):
        reference.with_config(recursion_limit=3).invoke({"count": 0}, _config())
    assert app.with_config({"configurable": {"thread_id": "bound"}}).invoke(
        {"count": 995}) == reference.invoke({"count": 995}, _config())
    with pytest.raises(hy.ConfigError, match="stream_mode"):
        list(app.stream({"count": 0}, _config(), stream_mode="nonsense"))


def test_unsupported_node_options_refused(system: hy.AgentSystem) -> None:
    from langgraph.types import CachePolicy

    before = system.agents()
    with pytest.raises(hy.ConfigError, match="cache_policy"):
        hylg.compile("tests.lgcompat.graphs:cached", system)
    with pytest.raises(hy.ConfigError, match="cache_policy"):
        hylg.compile(graphs.cached, system)
    assert system.agents() == before
    assert isinstance(graphs.cached.nodes["a"].cache_policy, CachePolicy)


def test_loop_errors_raised_as_langgraph_raises_them(system: hy.AgentSystem) -> None:
    from langgraph.errors import EmptyInputError, InvalidUpdateError

    reference, app = _pair(system, "clash")
    mine, theirs = _config(), _config()
    with pytest.raises(InvalidUpdateError):
        reference.invoke({"value": ""}, theirs)
    with pytest.raises(InvalidUpdateError):
        app.invoke({"value": ""}, mine)
    # both keep the two tasks' writes, so reading the state applies them again
    with pytest.raises(InvalidUpdateError):
        reference.get_state(theirs)
    with pytest.raises(InvalidUpdateError):
        app.get_state(mine)
    with pytest.raises(EmptyInputError):
        reference.invoke(None, _config())
    with pytest.raises(EmptyInputError):
        app.invoke(None, _config())


def test_subgraph_as_a_node(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "outer")
    mine, theirs = _config(), _config()
    input = {"text": "", "steps": []}
    ours_values, ours_updates = _stream(app, input, mine)
    their_values, their_updates = _stream(reference, input, theirs)
    assert ours_values == their_values
    _same_updates(ours_updates, their_updates)
    # the subgraph returns the parent's "steps" it was given plus its own: the
    # reducer adds them again, in both runtimes
    assert ours_values[-1] == {"text": "axyc", "steps": ["a", "a", "x", "y", "c"]}
    assert _history(app, mine) == _history(reference, theirs)


def test_two_interrupts_in_one_superstep_resumed_by_id(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "two_asks")
    mine, theirs = _config(), _config()
    ours = app.invoke({"answers": []}, mine)
    theirs_out = reference.invoke({"answers": []}, theirs)
    assert sorted(i.value for i in ours["__interrupt__"]) == \
        sorted(i.value for i in theirs_out["__interrupt__"]) == ["left?", "right?"]

    def by_id(interrupts: list[Interrupt]) -> dict[str, str]:
        return {i.id: f"said-{i.value}" for i in interrupts}

    ours = app.invoke(Command(resume=by_id(ours["__interrupt__"])), mine)
    theirs_out = reference.invoke(Command(resume=by_id(theirs_out["__interrupt__"])), theirs)
    assert sorted(ours["answers"]) == sorted(theirs_out["answers"]) == [
        "left:said-left?", "right:said-right?"]
    assert [len(s.values.get("answers", [])) for s in app.get_state_history(mine)] == \
        [len(s.values.get("answers", [])) for s in reference.get_state_history(theirs)]


def test_history_limit_and_before(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "sequence")
    mine, theirs = _config(), _config()
    input = {"text": "", "steps": []}
    app.invoke(input, mine)
    reference.invoke(input, theirs)
    assert [s.values for s in app.get_state_history(mine, limit=2)] == \
        [s.values for s in reference.get_state_history(theirs, limit=2)]
    ours_third = list(app.get_state_history(mine))[2]
    their_third = list(reference.get_state_history(theirs))[2]
    assert [s.values for s in app.get_state_history(mine, before=ours_third.config)] == \
        [s.values for s in reference.get_state_history(theirs, before=their_third.config)]


def test_interrupting_sends_beside_a_plain_edge(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "mixed_asks")
    mine, theirs = _config(), _config()
    input = {"subjects": ["x", "y"], "jokes": []}
    ours = app.invoke(input, mine)
    theirs_out = reference.invoke(input, theirs)
    assert sorted(i.value for i in ours["__interrupt__"]) == \
        sorted(i.value for i in theirs_out["__interrupt__"]) == ["x", "y"]
    assert sorted(ours["jokes"]) == sorted(theirs_out["jokes"])

    def by_id(interrupts: list[Interrupt]) -> dict[str, str]:
        return {i.id: f"said-{i.value}" for i in interrupts}

    ours = app.invoke(Command(resume=by_id(ours["__interrupt__"])), mine)
    theirs_out = reference.invoke(Command(resume=by_id(theirs_out["__interrupt__"])), theirs)
    assert sorted(ours["jokes"]) == sorted(theirs_out["jokes"]) == [
        "other", "plan", "x:said-x", "y:said-y"]


def test_breakpoint_after_and_per_call(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "sequence")
    input = {"text": "", "steps": []}
    for kwargs in ({"interrupt_after": ["a"]}, {"interrupt_before": ["c"]}):
        mine, theirs = _config(), _config()
        ours_values: list[Any] = []
        ours_updates: list[Any] = []
        for mode, chunk in app.stream(input, mine, stream_mode=["updates", "values"], **kwargs):
            (ours_values if mode == "values" else ours_updates).append(chunk)
        their = list(reference.stream(input, theirs, stream_mode=["updates", "values"],
                                      **kwargs))
        assert ours_values == [c for m, c in their if m == "values"]
        assert ours_updates == [c for m, c in their if m == "updates"]
        assert app.get_state(mine).next == reference.get_state(theirs).next
        assert app.invoke(None, mine) == reference.invoke(None, theirs)
        assert _history(app, mine) == _history(reference, theirs)


def test_same_id_shares_the_agent_only_with_the_same_options(system: hy.AgentSystem) -> None:
    first = hylg.compile(graphs.branch, system, id="shared-branch")
    again = hylg.compile(graphs.branch, system, id="shared-branch")
    assert again.agent.id == first.agent.id
    with pytest.raises(hy.ConfigError, match="other agent options"):
        hylg.compile(graphs.branch, system, id="shared-branch", idempotent_nodes={"big"})
    system.stop_agent("shared-branch")
    changed = hylg.compile(graphs.branch, system, id="shared-branch", idempotent_nodes={"big"})
    assert changed.invoke({"n": 50}, _config()) == {"n": 100, "route": "big"}


def test_subgraph_chunks_streamed_with_subgraphs_true(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "outer")
    input = {"text": "", "steps": []}

    def plain(chunks: Any) -> list[Any]:
        # namespaces name tasks by id: keep the node names
        return [(tuple(part.split(":")[0] for part in ns), mode, chunk)
                for ns, mode, chunk in chunks]

    modes = ["updates", "values", "custom"]
    ours = plain(app.stream(input, _config(), stream_mode=modes, subgraphs=True))
    theirs = plain(reference.stream(input, _config(), stream_mode=modes, subgraphs=True))
    assert ours == theirs
    assert (("sub",), "updates", {"x": {"text": "ax", "steps": ["x"]}}) in ours


def test_interrupt_inside_a_subgraph_resumes_it_where_it_stopped(
        system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "outer_ask")
    mine, theirs = _config(), _config()
    input = {"text": "", "steps": []}
    before = _runs("inner_first")
    theirs_out = reference.invoke(input, theirs)
    assert _runs("inner_first") == before + 1
    ours = app.invoke(input, mine)
    assert _runs("inner_first") == before + 2
    assert [i.value for i in ours["__interrupt__"]] == \
        [i.value for i in theirs_out["__interrupt__"]] == ["inner?"]
    assert app.invoke(Command(resume="R"), mine) == \
        reference.invoke(Command(resume="R"), theirs)
    # the subgraph went on from its own checkpoint: its first node did not run again
    assert _runs("inner_first") == before + 2
    assert app.get_state(mine, subgraphs=True).values == \
        reference.get_state(theirs, subgraphs=True).values


def test_runtime_context(system: hy.AgentSystem) -> None:
    reference, app = _pair(system, "with_context")
    input = {"text": "", "steps": []}
    for context in ({"user": "ada"}, graphs.Who(user="bob")):
        assert app.invoke(input, _config(), context=context) == \
            reference.invoke(input, _config(), context=context)
    assert list(app.stream(input, _config(), context={"user": "cy"}, stream_mode="updates")) \
        == [{"greet": {"text": "hello cy", "steps": ["greet"]}}]


def test_a_compiled_graph_keeps_its_breakpoints_and_refuses_a_store(
        system: hy.AgentSystem) -> None:
    app = hylg.compile(graphs.compiled_with_breakpoint, system, id="compiled-bp")
    config = _config()
    assert app.invoke({"text": "", "steps": []}, config) == {"text": "a", "steps": ["a"]}
    assert app.get_state(config).next == ("b",)
    with pytest.raises(hy.ConfigError, match="store"):
        hylg.compile(graphs.compiled_with_store, system, id="compiled-store")
    assert "compiled-store" not in system.agents()


def test_a_config_run_id_names_the_streamed_runs_invocation(system: hy.AgentSystem) -> None:
    app = hylg.compile(graphs.sequence, system)
    run_id = uuid.uuid4()
    config = {**_config(), "run_id": run_id}
    chunks = list(app.stream({"text": "", "steps": []}, config))
    assert chunks  # it ran
    thread = config["configurable"]["thread_id"]
    assert [i for i, _ in app.agent.thread(thread).invocations] == [run_id.hex]
    with pytest.raises(hy.RunRejected) as again:  # one run per id
        list(app.stream({"text": "", "steps": []}, config))
    assert again.value.code == "invocation_exists"
    with pytest.raises(hy.ConfigError, match="run_id"):
        list(app.stream({"text": "", "steps": []}, {**_config(), "run_id": "not a uuid"}))
