"""AgentConfig validation and policy-answer validation: pure, no actors."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._config import validate_config
from hayata_py._errors import ErrorInfo
from hayata_py._policy import validate_decision
from tests.graph_nodes import mock_node, once_policy


def _make_closure() -> Any:
    captured = 1

    def inner(ctx: hy.NodeContext) -> dict[str, Any]:
        return {"x": captured}

    return inner


def _make_nested() -> Any:
    def nested(ctx: hy.NodeContext) -> dict[str, Any]:
        return {}

    return nested


class _Holder:
    def method(self, ctx: hy.NodeContext) -> dict[str, Any]:
        return {}


def config(**overrides: Any) -> hy.AgentConfig:
    fields: dict[str, Any] = {"id": "a", "nodes": {"mock": mock_node},
                              "decision_policy": once_policy}
    fields.update(overrides)
    return hy.AgentConfig(**fields)


def test_functions_become_import_paths() -> None:
    spec = validate_config(config(nodes={"mock": mock_node, "other": "tests.graph_nodes:worker"}))
    assert spec.nodes == {"mock": "tests.graph_nodes:mock_node",
                          "other": "tests.graph_nodes:worker"}
    assert spec.policy == "tests.graph_nodes:once_policy"


@pytest.mark.parametrize(
    ("overrides", "field", "why"),
    [
        ({"id": ""}, "id", "non-empty"),
        ({"id": 7}, "id", "non-empty"),
        ({"id": "a/b"}, "id", "may not contain"),
        ({"nodes": {}}, "nodes", "non-empty"),
        ({"nodes": {1: mock_node}}, "nodes", "node ids"),
        ({"nodes": {"l": lambda ctx: {}}}, "nodes['l']", "lambda"),
        ({"nodes": {"c": _make_closure()}}, "nodes['c']", "closure"),
        ({"nodes": {"n": _make_nested()}}, "nodes['n']", "nested"),
        ({"nodes": {"m": _Holder().method}}, "nodes['m']", "bound method"),
        ({"nodes": {"p": functools.partial(mock_node)}}, "nodes['p']", "process boundary"),
        ({"nodes": {"s": "no_colon"}}, "nodes['s']", "package.module:function"),
        ({"nodes": {"s": "tests.nothing_here:f"}}, "nodes['s']", "cannot import"),
        ({"nodes": {"s": "tests.graph_nodes:missing"}}, "nodes['s']", "not found"),
        ({"nodes": {"s": 42}}, "nodes['s']", "expected a function"),
        ({"decision_policy": lambda ctx: None}, "decision_policy", "lambda"),
        ({"max_steps": 0}, "max_steps", "positive"),
        ({"max_steps": True}, "max_steps", "positive"),
        ({"execution_timeout": 0}, "execution_timeout", "positive"),
        ({"execution_timeout": float("nan")}, "execution_timeout", "positive"),
        ({"state": {"when": object()}}, "state", "state.when"),
        ({"state": [1]}, "state", "must be a dict"),
        ({"idempotent_nodes": frozenset({"nope"})}, "idempotent_nodes", "unknown"),
    ],
)
def test_invalid_config_names_the_field(overrides: dict[str, Any], field: str, why: str) -> None:
    with pytest.raises(hy.ConfigError) as err:
        validate_config(config(**overrides))
    assert err.value.details["field"] == field
    assert err.value.code == "invalid_config"
    assert why in str(err.value)


def test_refusals_say_why_a_lambda_cannot_be_a_node() -> None:
    with pytest.raises(hy.ConfigError, match="cannot cross a process boundary or be found again"):
        validate_config(config(nodes={"l": lambda ctx: {}}))


def test_system_options_are_validated(tmp_path: Any) -> None:
    with pytest.raises(hy.ConfigError) as err:
        hy.AgentSystem(tmp_path, base="multiprocQueueBase")
    assert err.value.details["field"] == "base"
    with pytest.raises(hy.ConfigError) as err:
        hy.AgentSystem(tmp_path, admin_port=70000)
    assert err.value.details["field"] == "admin_port"
    with pytest.raises(hy.ConfigError) as err:
        hy.AgentSystem(tmp_path, exit_with_owner="yes")  # type: ignore[arg-type]
    assert err.value.details["field"] == "exit_with_owner"
    with pytest.raises(hy.ConfigError) as err:
        hy.AgentSystem(tmp_path, gc_freeze=1)  # type: ignore[arg-type]
    assert err.value.details["field"] == "gc_freeze"


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (None, "invalid_policy_result"),
        ({"next": "a"}, "invalid_policy_result"),
        (hy.Next(3), "invalid_policy_result"),
        (hy.Next([]), "invalid_policy_result"),
        (hy.Next(["a", 1]), "invalid_policy_result"),
        (hy.Next("zzz"), "unknown_node"),
        (hy.Next(["a", "a"]), "duplicate_node"),
    ],
)
def test_invalid_policy_answers(answer: Any, code: str) -> None:
    outcome = validate_decision(answer, {"a", "b"})
    assert isinstance(outcome, ErrorInfo) and outcome.code == code


def test_valid_policy_answers() -> None:
    seq = validate_decision(hy.Next("a", 1), {"a", "b"})
    assert not isinstance(seq, ErrorInfo)
    assert (seq.nodes, seq.parallel, seq.input) == (("a",), False, 1)
    par = validate_decision(hy.Next(["b", "a"]), {"a", "b"})
    assert not isinstance(par, ErrorInfo) and par.nodes == ("b", "a") and par.parallel
    fin = validate_decision(hy.Finish({"r": 1}), {"a"})
    assert not isinstance(fin, ErrorInfo) and fin.finish and fin.result == {"r": 1}


def test_map_concurrency_defaults_to_the_core_count() -> None:
    import dataclasses
    import os

    config = hy.AgentConfig("a", {"m": "tests.graph_nodes:mock_node"},
                            "tests.graph_nodes:once_policy")
    assert config.map_concurrency == (os.cpu_count() or 1)
    assert validate_config(config).map_concurrency == config.map_concurrency
    assert validate_config(dataclasses.replace(config, map_concurrency=3)).map_concurrency == 3
