"""Per-node timeouts and ``async def`` nodes in an AgentConfig: what
:func:`validate_config` accepts and refuses, before any process starts (running
them: ``tests/runtime/test_node_timeouts_async.py``)."""

from __future__ import annotations

from typing import Any

import pytest

import hayata_py as hy
from hayata_py._config import validate_config

NODES = {"slow": "tests.hitl_nodes:flaky", "quick": "tests.hitl_nodes:flaky",
         "stream": "tests.hitl_nodes:streaming"}


def config(**overrides: Any) -> hy.AgentConfig:
    fields: dict[str, Any] = {"id": "timeouts", "nodes": NODES,
                              "decision_policy": "tests.hitl_nodes:sequence"}
    fields.update(overrides)
    return hy.AgentConfig(**fields)


async def _nested_async_node(ctx: hy.NodeContext) -> dict[str, Any]:
    return {}


def test_an_async_node_is_refused_when_it_cannot_be_imported_by_path() -> None:
    async def local(ctx: hy.NodeContext) -> dict[str, Any]:
        return {}

    with pytest.raises(hy.ConfigError) as err:
        validate_config(config(nodes={"x": local}))
    assert err.value.details["field"] == "nodes['x']"
    assert "nested function" in str(err.value)
    spec = validate_config(config(nodes={"x": _nested_async_node}))
    assert spec.nodes["x"].endswith(":_nested_async_node")


@pytest.mark.parametrize(("value", "field", "why"), [
    ({"slow": -1}, "node_timeouts['slow']", "positive"),
    ({"slow": 0}, "node_timeouts['slow']", "positive"),
    ({"slow": float("nan")}, "node_timeouts['slow']", "positive"),
    ({"slow": True}, "node_timeouts['slow']", "positive"),
    ({"slow": 1e300}, "node_timeouts['slow']", "at most"),
    ({"nope": 1}, "node_timeouts", "unknown node id 'nope'"),
    ([("slow", 1)], "node_timeouts", "mapping"),
])
def test_bad_node_timeouts_name_the_field(value: Any, field: str, why: str) -> None:
    with pytest.raises(hy.ConfigError) as err:
        validate_config(config(node_timeouts=value))
    assert err.value.details["field"] == field
    assert why in str(err.value)
