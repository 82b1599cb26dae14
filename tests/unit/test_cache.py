"""Node result caching, the pure parts: the policy, the keys, the machine's event."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import msgpack
import pytest

import hayata_py as hy
from hayata_py import _invocation as m
from hayata_py._cache import MAX_TTL, cache_key, default_key
from hayata_py._config import validate_config
from tests.graph_nodes import mock_node, once_policy


@pytest.mark.parametrize("ttl", [0, -1, -0.5, math.nan, math.inf, MAX_TTL + 1, True, "60",
                                 None])
def test_a_bad_ttl_names_the_field(ttl: Any) -> None:
    with pytest.raises(hy.ConfigError) as err:
        hy.CachePolicy(ttl=ttl)
    assert err.value.details["field"] == "ttl"
    assert "finite number of seconds > 0" in str(err.value)


def test_a_policy_is_validated_into_plain_data() -> None:
    spec = validate_config(hy.AgentConfig("a", {"mock": mock_node}, once_policy, cache={
        "mock": hy.CachePolicy(ttl=5, key="tests.cache_nodes:text_key")}))
    assert spec.cache == {"mock": hy.CachePolicy(5.0, "tests.cache_nodes:text_key")}
    from tests.cache_nodes import text_key

    by_function = validate_config(hy.AgentConfig("a", {"mock": mock_node}, once_policy,
                                                 cache={"mock": hy.CachePolicy(5, text_key)}))
    assert by_function.cache == spec.cache
    assert validate_config(hy.AgentConfig("a", {"mock": mock_node}, once_policy)).cache == {}


def test_the_default_key_is_stable_and_ignores_dict_order() -> None:
    """Same node and input (dict keys in any order, tuples as lists): same key;
    another node or input: another key."""
    key = default_key("embed", {"text": "hi", "opts": {"a": 1, "b": [1, 2]}})
    assert key == default_key("embed", {"opts": {"b": (1, 2), "a": 1}, "text": "hi"})
    assert len(key) == 64 and int(key, 16) >= 0
    assert key != default_key("other", {"text": "hi", "opts": {"a": 1, "b": [1, 2]}})
    assert key != default_key("embed", {"text": "ho", "opts": {"a": 1, "b": [1, 2]}})
    # Pinned: SHA-256 of the format byte and msgpack of [node id, input], so a key
    # written by one version is found by the next.
    assert default_key("embed", "hi") == hashlib.sha256(
        bytes([1]) + msgpack.packb(["embed", "hi"])).hexdigest()


def test_a_key_function_gets_node_input_and_state() -> None:
    key = cache_key("embed", "tests.cache_nodes:text_key", {"text": "hi", "log": "x"}, {})
    assert key == cache_key("embed", "tests.cache_nodes:text_key", {"text": "hi"}, {"n": 1})
    assert key != cache_key("embed", "tests.cache_nodes:text_key", {"text": "ho"}, {})
    with pytest.raises(TypeError, match="not str or bytes"):
        cache_key("embed", "tests.graph_nodes:mock_node", {"text": "hi"}, {})


def _running() -> tuple[m.Invocation, m.Dispatch]:
    inv = m.Invocation(m.Seed("inv", {"q": 1}, {}, True), m.Rules(frozenset({"embed"}), 5, 30.0))
    commands = inv.step(m.Begin())
    commands = inv.step(m.PolicyAnswered(hy.Next("embed", {"q": 1})))
    commands = inv.step(m.CheckpointSaved())
    (dispatch,) = [c for c in commands if isinstance(c, m.Dispatch)]
    return inv, dispatch


@pytest.mark.parametrize("cached", [False, True])
def test_node_completed_says_cached_only_for_a_cached_outcome(cached: bool) -> None:
    inv, dispatch = _running()
    out = inv.step(m.TaskOutcome(dispatch.execution_id, dispatch.key, True, {"r": 1},
                                 cached=cached))
    (done,) = [c for c in out if isinstance(c, m.Emit) and c.type == "node_completed"]
    assert done.data == {"node_id": "embed", "execution_id": dispatch.execution_id} | (
        {"cached": True} if cached else {})
