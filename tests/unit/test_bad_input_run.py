"""Bad input, systematically: run options, policy answers, node results and partials.

Pure checks, no actors: run options are refused by ``AgentRef.run`` before
anything is sent (the system behind the ref fails the test if touched), a
policy's answer is turned into a Decision or an error naming the field by
``validate_decision``, and what a node may return or stream is what the
durable codec accepts (``check_encodable``, then ``encode``/``decode``).
tests/runtime/test_bad_input_actors.py runs the same refusals through real actors.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from thespian.actors import ActorAddress

import hayata_py as hy
from hayata_py._codec import MAX_DEPTH, check_encodable, decode, encode
from hayata_py._policy import Decision, validate_decision
from tests.bad_input import FAST, Opaque, anything, assert_refusal, deep, plain

KNOWN = {"a": "m:a", "b": "m:b", "c": "m:c"}
POLICY_CODES = {"invalid_policy_result", "unknown_node", "duplicate_node"}


class Touched(Exception):
    """The ref reached its system: the options were accepted."""


class NoSystem:
    """Stands in for the AgentSystem: any use of it means something was sent."""

    def __getattr__(self, name: str) -> Any:
        raise Touched(name)


subscribers = st.one_of(st.none(), st.just(hy.CALLER), st.just(ActorAddress("x")), anything)
streams = st.one_of(st.booleans(), anything)
inputs = st.one_of(plain, anything)


def _valid_options(input: Any, subscriber: Any, stream: Any) -> bool:
    if not isinstance(stream, bool):
        return False
    if subscriber is not None and not isinstance(subscriber, (hy.messages.Caller, ActorAddress)):
        return False
    if stream and subscriber is None:
        return False
    try:
        check_encodable(input, "input")
    except hy.EncodingError:
        return False
    return True


@FAST
@given(inputs, subscribers, streams)
def test_run_options_are_refused_before_anything_is_sent(
        input: Any, subscriber: Any, stream: Any) -> None:
    ref = hy.AgentRef(NoSystem(), "a")  # type: ignore[arg-type]
    try:
        ref.run(input, subscriber=subscriber, stream=stream)
    except Touched:
        assert _valid_options(input, subscriber, stream)
        return
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        assert isinstance(exc, hy.RunRejected)
        assert exc.code in {"invalid_option", "invalid_input"}
        assert_refusal(exc, {"input", "subscriber", "stream"})
        assert not _valid_options(input, subscriber, stream)
        return
    pytest.fail("run() returned without reaching the system")


@FAST
@given(subscribers, streams)
def test_recover_options_are_refused_before_anything_is_sent(
        subscriber: Any, stream: Any) -> None:
    ref = hy.AgentRef(NoSystem(), "a")  # type: ignore[arg-type]
    try:
        ref.recover(subscriber=subscriber, stream=stream)
    except Touched:
        assert _valid_options(None, subscriber, stream)
        return
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        assert isinstance(exc, hy.RunRejected) and exc.code == "invalid_option"
        assert_refusal(exc, {"subscriber", "stream"})


ids = st.one_of(st.text(min_size=1, max_size=6), st.just(""), anything)
results = st.one_of(st.dictionaries(st.text(max_size=3), plain, max_size=2),
                    st.dictionaries(st.integers(), plain, min_size=1, max_size=2), anything)
CALLS = {
    "get_result": (lambda ref, i, r: ref.get_result(i), {"invocation_id"}),
    "wait": (lambda ref, i, r: ref.wait(i, 1.0), {"invocation_id"}),
    "messages": (lambda ref, i, r: next(iter(ref.messages(i, 1.0))), {"invocation_id"}),
    "resume": (lambda ref, i, r: ref.resume(i, None), {"invocation_id"}),
    "abandon": (lambda ref, i, r: ref.abandon(i), {"invocation_id"}),
    "resolve_task": (lambda ref, i, r: ref.resolve_task(i, result=r), {"task_id", "result"}),
    "tasks": (lambda ref, i, r: ref.tasks(i), {"invocation_id"}),
}


def _valid_call(name: str, ident: Any, result: Any) -> bool:
    if name == "tasks" and ident is None:
        return True  # the current or latest invocation
    if not isinstance(ident, str) or not ident:
        return False
    if name != "resolve_task":
        return True
    if not isinstance(result, dict) or not all(isinstance(k, str) for k in result):
        return False
    try:
        check_encodable(result, "result")
    except hy.EncodingError:
        return False
    return True


@FAST
@given(st.sampled_from(sorted(CALLS)), ids, results)
def test_agent_ref_arguments_are_refused_before_anything_is_sent(
        name: str, ident: Any, result: Any) -> None:
    """Regression: the agent drops a message of the wrong shape, so a bad id or
    result only timed out (30 s) instead of naming the argument."""
    call, fields = CALLS[name]
    ref = hy.AgentRef(NoSystem(), "a")  # type: ignore[arg-type]
    try:
        call(ref, ident, result)
    except Touched:
        assert _valid_call(name, ident, result)
        return
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        assert isinstance(exc, hy.ConfigError), f"{type(exc).__name__}: {exc}"
        assert_refusal(exc, fields)
        assert not _valid_call(name, ident, result)
        return
    pytest.fail(f"{name}() returned without reaching the system")


node_names = st.one_of(st.sampled_from(sorted(KNOWN)), st.text(max_size=3))
node_fields = st.one_of(
    node_names, st.lists(node_names, max_size=4), st.tuples(node_names, node_names),
    st.lists(st.one_of(node_names, anything), max_size=3), anything)
answers = st.one_of(
    st.builds(hy.Next, node_fields, inputs), st.builds(hy.Finish, inputs),
    st.builds(hy.Next, node_fields), st.builds(hy.Pause, inputs), anything)


@FAST
@given(answers)
def test_policy_answers_become_a_decision_or_an_error_naming_the_field(answer: Any) -> None:
    decision = validate_decision(answer, KNOWN)
    if isinstance(decision, Decision):
        if decision.finish:
            assert isinstance(answer, hy.Finish)
            check_encodable(decision.result, "result")
        elif decision.pause:
            assert isinstance(answer, hy.Pause)
            check_encodable(decision.result, "payload")
        else:
            assert isinstance(answer, hy.Next)
            assert decision.nodes and set(decision.nodes) <= set(KNOWN)
            assert len(set(decision.nodes)) == len(decision.nodes)
            assert decision.parallel == (not isinstance(answer.node, str))
            check_encodable(decision.input, "input")
        return
    assert isinstance(decision, hy.ErrorInfo), decision
    assert decision.code in POLICY_CODES, decision
    field = decision.details.get("field")
    assert field in {"answer", "node", "input", "result", "payload"}, decision
    assert field in decision.message, decision
    check_encodable(decision.details, "details")  # it is recorded with the invocation


@pytest.mark.parametrize(
    ("answer", "field", "key"),
    [
        # Regressions: the pure check passed these; only the agent caught them.
        (hy.Finish({"when": Opaque()}), "result", "result.when"),
        (hy.Finish([2**64]), "result", "result[0]"),
        (hy.Next("a", {1: "x"}), "input", "input"),
        (hy.Next(["a", "b"], deep(MAX_DEPTH + 1)), "input", None),
        (hy.Finish({"t": "\ud800"}), "result", "result.t"),
    ],
)
def test_unstorable_policy_values_are_refused_by_the_pure_check(
        answer: Any, field: str, key: str | None) -> None:
    error = validate_decision(answer, KNOWN)
    assert isinstance(error, hy.ErrorInfo) and error.code == "invalid_policy_result"
    assert error.details["field"] == field
    if key is not None:
        assert error.details["key"] == key


@pytest.mark.parametrize(
    ("answer", "code", "field"),
    [
        ({"not": "a decision"}, "invalid_policy_result", "answer"),
        (hy.Next([]), "invalid_policy_result", "node"),
        (hy.Next(["a", 1]), "invalid_policy_result", "node"),  # type: ignore[list-item]
        (hy.Next({"a"}), "invalid_policy_result", "node"),  # type: ignore[arg-type]
        (hy.Next(["a", "a"]), "duplicate_node", "node"),
        (hy.Next("zz"), "unknown_node", "node"),
    ],
)
def test_policy_errors_name_the_field(answer: Any, code: str, field: str) -> None:
    error = validate_decision(answer, KNOWN)
    assert isinstance(error, hy.ErrorInfo)
    assert (error.code, error.details["field"]) == (code, field)


def _plainly(value: Any) -> Any:
    """``value`` as the store gives it back: tuples as lists, NaN as a marker."""
    if isinstance(value, (list, tuple)):
        return [_plainly(v) for v in value]
    if isinstance(value, dict):
        return {k: _plainly(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


_STEP = re.compile(r"\.(\w+)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")


def _at(value: Any, path: str, root: str) -> Any:
    """The part of ``value`` that ``path`` (``root.key[2]['any key']``) names."""
    rest = path[len(root):]
    while rest:
        step = _STEP.match(rest)
        assert step is not None, f"ambiguous path {path!r} at {rest!r}"
        name, index, quoted = step.groups()
        value = value[int(index)] if index else value[name or ast.literal_eval(quoted)]
        rest = rest[step.end():]
    return value


@FAST
@given(st.one_of(plain, anything, st.dictionaries(st.text(max_size=4), anything, max_size=3)))
def test_node_results_and_partials_store_exactly_or_name_the_bad_part(value: Any) -> None:
    """What a node returns or streams is stored as is, or refused naming where."""
    try:
        check_encodable(value, "result")
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        assert isinstance(exc, hy.EncodingError) and exc.code == "unencodable_value"
        key = exc.details["key"]
        assert key.startswith("result") and key in str(exc)
        _at(value, key, "result")  # the path leads to a part of the value
        with pytest.raises(hy.EncodingError):
            encode(value, key="result")
        return
    stored = decode(encode(value, key="result"), record="task t", column="result")
    assert _plainly(stored) == _plainly(value)


@pytest.mark.parametrize("value", ["\ud800", {"k": ["ok", "\udfff"]}, {"\ud800": 1}])
def test_lone_surrogates_are_refused_by_the_check_not_by_the_store(value: Any) -> None:
    """Regression: check_encodable passed them and encode() then failed in msgpack,
    so a run input passed the boundary check and was refused only by the store."""
    with pytest.raises(hy.EncodingError) as err:
        check_encodable(value, "input")
    assert "UTF-8" in str(err.value)
    ref = hy.AgentRef(NoSystem(), "a")  # type: ignore[arg-type]
    with pytest.raises(hy.RunRejected) as rejected:
        ref.run(value)
    assert rejected.value.code == "invalid_input"
