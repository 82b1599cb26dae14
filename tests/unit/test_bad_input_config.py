"""Bad input, systematically: AgentConfig, Liveness and the AgentSystem options.

Each field gets arbitrary values; :func:`validate_config` (what
``start_agent`` runs before any process starts) accepts the config or raises
``ConfigError`` naming the field, never anything else.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hayata_py as hy
from hayata_py._codec import check_encodable
from hayata_py._config import AgentSpec, validate_config
from supervisors._system import STARTED_SESSIONS
from tests.bad_input import FAST, anything, assert_refusal, plain, scalars
from tests.graph_nodes import mock_node, once_policy

FIELDS = {f.name for f in dataclasses.fields(hy.AgentConfig)}


def _local_error() -> type[Exception]:
    class Local(Exception):
        pass
    return Local


_LocalError = _local_error()


def _local_key() -> Any:
    def key(ctx: hy.CacheKeyContext) -> str:
        return "k"
    return key

NODES = {"mock": mock_node, "other": "tests.graph_nodes:worker"}

paths = st.one_of(
    st.sampled_from([
        "tests.graph_nodes:mock_node", "tests.graph_nodes:worker", ".graph_nodes:mock_node",
        "..:x", "tests..graph_nodes:mock_node", "tests.graph_nodes:", ":mock_node",
        "tests.graph_nodes:mock_node.nope", "tests.graph_nodes:hy", "tests:graph_nodes",
        "tests.graph_nodes:mock_node:again", " tests.graph_nodes:mock_node ",
        "tests.graph_nodes\x00:mock_node", "tests.graph_nodes:mock_node\x00",
        "tests.nothing_here:f", "tests.graph_nodes:..", "tests/graph_nodes:mock_node",
    ]),
    st.text(max_size=10).map(lambda t: f"tests.{t}:{t}"),
)
functions = st.one_of(paths, st.sampled_from([mock_node, once_policy, print, len]), anything)
capabilities = st.one_of(
    st.dictionaries(st.text(max_size=4), scalars, max_size=3), anything)

field_values: dict[str, st.SearchStrategy[Any]] = {
    "id": st.one_of(st.text(max_size=8), anything),
    "nodes": st.one_of(st.dictionaries(st.text(max_size=5), functions, max_size=3), anything),
    "decision_policy": functions,
    "state": st.one_of(st.dictionaries(st.text(max_size=5), plain, max_size=3), anything),
    "max_steps": st.one_of(st.integers(), anything),
    "execution_timeout": st.one_of(st.floats(), st.integers(), anything),
    "idempotent_nodes": st.one_of(
        st.frozensets(st.sampled_from(["mock", "other", "x"])), st.text(max_size=6),
        st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3), anything),
    "placement": capabilities,
    "node_placement": st.one_of(
        st.dictionaries(st.sampled_from(["mock", "other", "x"]), capabilities, max_size=2),
        anything),
    "lease_seconds": st.one_of(st.floats(), st.integers(), anything),
    "map_concurrency": st.one_of(st.integers(), st.booleans(), st.floats(), anything),
    "retry": st.one_of(
        st.dictionaries(st.sampled_from(["mock", "other", "x"]),
                        st.one_of(st.just(hy.RetryPolicy()), anything), max_size=2),
        anything),
    "default_retry": st.one_of(st.none(), st.just(hy.RetryPolicy(max_attempts=2)), anything),
    "max_invocations": st.one_of(st.integers(), st.booleans(), st.floats(), anything),
    "node_concurrency": st.one_of(
        st.dictionaries(st.sampled_from(["mock", "other", "x"]),
                        st.one_of(st.integers(), st.booleans(), anything), max_size=2),
        anything),
    "edge_concurrency": st.one_of(
        st.dictionaries(st.sampled_from(["mock", "other", "x"]),
                        st.one_of(st.integers(), st.booleans(), anything), max_size=2),
        anything),
    "edge_idle_timeout": st.one_of(st.floats(), st.integers(), anything),
    "auto_recover": st.one_of(st.booleans(), anything),
    "circuit": st.one_of(
        st.dictionaries(st.sampled_from(["mock", "other", "x"]),
                        st.one_of(st.just(hy.CircuitBreaker()), anything), max_size=2),
        anything),
    "node_timeouts": st.one_of(
        st.dictionaries(st.sampled_from(["mock", "other", "x"]),
                        st.one_of(st.floats(), st.integers(), anything), max_size=2),
        anything),
    "cache": st.one_of(
        st.dictionaries(st.sampled_from(["mock", "other", "x"]),
                        st.one_of(st.just(hy.CachePolicy(60)),
                                  st.builds(hy.CachePolicy, st.just(5.0), functions),
                                  anything), max_size=2),
        anything),
}


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict[str, Any], set[str]]:
    """A valid config with some fields replaced by arbitrary values; and those fields."""
    values: dict[str, Any] = {"id": "a", "nodes": NODES, "decision_policy": once_policy}
    changed = draw(st.sets(st.sampled_from(sorted(field_values)), min_size=1, max_size=3))
    for name in changed:
        values[name] = draw(field_values[name])
    return values, changed


def _check_spec(spec: AgentSpec) -> None:
    """An accepted config is plain data every process can use."""
    assert isinstance(spec.id, str) and spec.id.strip() == spec.id and spec.id
    assert spec.nodes and all(isinstance(k, str) and isinstance(v, str)
                              for k, v in spec.nodes.items())
    assert isinstance(spec.policy, str)
    assert isinstance(spec.max_steps, int) and spec.max_steps > 0
    assert 0 < spec.execution_timeout <= 365 * 24 * 3600
    assert spec.idempotent_nodes <= set(spec.nodes)
    assert set(spec.node_placement) <= set(spec.nodes)
    assert isinstance(spec.map_concurrency, int) and 1 <= spec.map_concurrency <= 1024
    assert set(spec.node_timeouts) <= set(spec.nodes)
    assert isinstance(spec.max_invocations, int) and spec.max_invocations >= 1
    assert set(spec.node_concurrency) == set(spec.nodes) == set(spec.edge_concurrency)
    assert all(isinstance(n, int) and n >= 1 for n in spec.node_concurrency.values())
    assert all(n == 1 for n in spec.edge_concurrency.values())  # NODES has no async node
    assert spec.edge_idle_timeout > 0 and isinstance(spec.auto_recover, bool)
    assert set(spec.retry) <= set(spec.nodes)
    assert set(spec.circuit) <= set(spec.nodes)
    assert all(isinstance(b, hy.CircuitBreaker) for b in spec.circuit.values())
    assert all(isinstance(p, str) for policy in spec.retry.values() for p in policy.retry_on)
    assert all(0 < t <= 365 * 24 * 3600 for t in spec.node_timeouts.values())
    assert set(spec.cache) <= set(spec.nodes)
    assert all(p.ttl > 0 and (p.key is None or isinstance(p.key, str))
               for p in spec.cache.values())
    check_encodable(spec.state, "state")
    assert pickle.loads(pickle.dumps(spec)) == spec


@FAST
@given(configs())
def test_any_config_is_accepted_or_refused_naming_a_field(
        drawn: tuple[dict[str, Any], set[str]]) -> None:
    values, changed = drawn
    try:
        spec = validate_config(hy.AgentConfig(**values))
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        field = assert_refusal(exc, FIELDS)
        assert field.split("[", 1)[0] in changed, (field, changed)
        return
    _check_spec(spec)


def _forged(**fields: Any) -> hy.CircuitBreaker:
    """A CircuitBreaker whose fields were changed after it was checked."""
    breaker = hy.CircuitBreaker()
    for name, value in fields.items():
        object.__setattr__(breaker, name, value)
    return breaker


@pytest.mark.parametrize(
    ("overrides", "field", "why"),
    [
        # Regressions found by the property above.
        ({"nodes": {"m": ".graph_nodes:mock_node"}}, "nodes['m']", "relative"),
        ({"decision_policy": "..:x"}, "decision_policy", "relative"),
        ({"nodes": {"m": "tests.graph_nodes\x00:mock_node"}}, "nodes['m']", "cannot import"),
        ({"idempotent_nodes": 3}, "idempotent_nodes", "set of node ids"),
        ({"idempotent_nodes": "mock"}, "idempotent_nodes", "set of node ids"),
        ({"idempotent_nodes": [["mock"]]}, "idempotent_nodes", "set of node ids"),
        ({"idempotent_nodes": [1]}, "idempotent_nodes", "set of node ids"),
        ({"execution_timeout": 1e300}, "execution_timeout", "at most"),
        ({"placement": {"gpu": float("nan")}}, "placement", "finite"),
        ({"node_placement": {"mock": {"mem": float("inf")}}}, "node_placement['mock']",
         "finite"),
        ({"map_concurrency": 0}, "map_concurrency", "from 1 to 1024"),
        ({"map_concurrency": True}, "map_concurrency", "from 1 to 1024"),
        ({"map_concurrency": 2.0}, "map_concurrency", "from 1 to 1024"),
        ({"map_concurrency": 5000}, "map_concurrency", "from 1 to 1024"),
        ({"max_invocations": 0}, "max_invocations", "an int from 1"),
        ({"max_invocations": -3}, "max_invocations", "an int from 1"),
        ({"max_invocations": 2.0}, "max_invocations", "an int from 1"),
        ({"max_invocations": "8"}, "max_invocations", "an int from 1"),
        ({"max_invocations": True}, "max_invocations", "an int from 1"),
        ({"node_concurrency": {"nope": 2}}, "node_concurrency", "unknown node id 'nope'"),
        ({"node_concurrency": {"mock": 0}}, "node_concurrency['mock']", "an int from 1"),
        ({"node_concurrency": {"mock": 1.5}}, "node_concurrency['mock']", "an int from 1"),
        ({"node_concurrency": 4}, "node_concurrency", "mapping"),
        ({"edge_concurrency": {"nope": 2}}, "edge_concurrency", "unknown node id 'nope'"),
        ({"edge_concurrency": {"mock": -1}}, "edge_concurrency['mock']", "an int from 1"),
        ({"edge_concurrency": {"mock": 20}}, "edge_concurrency['mock']", "async def"),
        ({"edge_idle_timeout": 0}, "edge_idle_timeout", "positive number"),
        ({"edge_idle_timeout": float("inf")}, "edge_idle_timeout", "positive number"),
        ({"auto_recover": "yes"}, "auto_recover", "True or False"),
        ({"retry": {"nope": hy.RetryPolicy()}}, "retry", "unknown node id 'nope'"),
        ({"retry": {"mock": 3}}, "retry['mock']", "hy.RetryPolicy"),
        ({"retry": [("mock", hy.RetryPolicy())]}, "retry", "mapping"),
        ({"default_retry": {"max_attempts": 3}}, "default_retry", "hy.RetryPolicy"),
        ({"retry": {"mock": hy.RetryPolicy(retry_on=(_LocalError,))}},
         "retry['mock'].retry_on", "does not lead back"),
        ({"retry": {"mock": hy.RetryPolicy(retry_on=("tests.nothing_here:E",))}},
         "retry['mock'].retry_on", "cannot import"),
        ({"default_retry": hy.RetryPolicy(retry_on=("tests.graph_nodes:mock_node",))},
         "default_retry.retry_on", "not an exception class"),
        ({"cache": {"nope": hy.CachePolicy(60)}}, "cache", "unknown node id 'nope'"),
        ({"cache": {"mock": 60}}, "cache['mock']", "hy.CachePolicy"),
        ({"cache": [("mock", hy.CachePolicy(60))]}, "cache", "mapping"),
        ({"cache": {"mock": hy.CachePolicy(60, key=lambda ctx: "k")}}, "cache['mock'].key",
         "lambda"),
        ({"cache": {"mock": hy.CachePolicy(60, key=_local_key())}}, "cache['mock'].key",
         "nested function or closure"),
        ({"cache": {"mock": hy.CachePolicy(60, key="tests.nothing_here:k")}},
         "cache['mock'].key", "cannot import"),
        ({"cache": {"mock": hy.CachePolicy(60, key="tests.cache_nodes:nope")}},
         "cache['mock'].key", "not found"),
        ({"cache": {"mock": hy.CachePolicy(60, key="no_colon")}}, "cache['mock'].key",
         "is not 'package.module:function'"),
        ({"circuit": {"nope": hy.CircuitBreaker()}}, "circuit", "unknown node id 'nope'"),
        ({"circuit": {"mock": {"failures": 5}}}, "circuit['mock']", "hy.CircuitBreaker"),
        ({"circuit": [("mock", hy.CircuitBreaker())]}, "circuit", "mapping"),
        ({"circuit": {"mock": _forged(failures=0)}}, "circuit['mock'].failures",
         "positive int"),
        ({"circuit": {"mock": _forged(cool_down=float("nan"))}},
         "circuit['mock'].cool_down", "positive finite"),
    ],
)
def test_regressions_name_the_field(overrides: dict[str, Any], field: str, why: str) -> None:
    values: dict[str, Any] = {"id": "a", "nodes": NODES, "decision_policy": once_policy}
    values.update(overrides)
    with pytest.raises(hy.ConfigError) as err:
        validate_config(hy.AgentConfig(**values))
    assert err.value.details["field"] == field
    assert why in str(err.value)


def test_service_fields_default_and_accept_an_async_node() -> None:
    spec = validate_config(hy.AgentConfig("a", NODES, once_policy))
    assert spec.max_invocations == 1 and not spec.auto_recover
    assert spec.edge_concurrency == {"mock": 1, "other": 1}
    assert all(n >= 4 for n in spec.node_concurrency.values())
    nodes = {**NODES, "stream": "tests.hitl_nodes:streaming"}  # an async def node
    spec = validate_config(hy.AgentConfig("a", nodes, once_policy, max_invocations=500,
                                          node_concurrency={"mock": 2},
                                          edge_concurrency={"stream": 20},
                                          edge_idle_timeout=5, auto_recover=True))
    assert (spec.max_invocations, spec.node_concurrency["mock"]) == (500, 2)
    assert spec.edge_concurrency == {"mock": 1, "other": 1, "stream": 20}
    assert spec.edge_idle_timeout == 5.0 and spec.auto_recover


def test_idempotent_nodes_accepts_any_collection_of_ids() -> None:
    for given_ids in (["mock"], ("mock",), {"mock"}, frozenset({"mock", "other"})):
        spec = validate_config(hy.AgentConfig("a", NODES, once_policy,
                                              idempotent_nodes=given_ids))  # type: ignore[arg-type]
        assert spec.idempotent_nodes == frozenset(given_ids)


liveness_values = st.one_of(st.floats(), st.integers(min_value=-5, max_value=10**6), anything)


@FAST
@given(st.dictionaries(st.sampled_from(["heartbeat", "heartbeat_misses", "convention_period",
                                        "convention_misses"]), liveness_values, min_size=1))
def test_any_liveness_is_accepted_or_refused_naming_a_field(values: dict[str, Any]) -> None:
    try:
        liveness = hy.Liveness(**values)
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        field = assert_refusal(exc, {f"liveness.{name}" for name in values})
        assert field.removeprefix("liveness.") in values
        return
    assert 0.01 <= liveness.heartbeat <= 60 and 1 <= liveness.convention_period <= 3600
    assert liveness.heartbeat_misses >= 1 and liveness.convention_misses >= 1


system_values: dict[str, st.SearchStrategy[Any]] = {
    "base": st.one_of(st.text(max_size=6), anything),
    "admin_port": st.one_of(st.integers(max_value=0), st.integers(min_value=65536),
                            anything.filter(lambda v: v is not None and not (
                                isinstance(v, int) and 0 < v < 65536))),
    "liveness": st.one_of(st.dictionaries(st.text(), st.integers(), max_size=2),
                          anything.filter(lambda v: v is not None)),
    "name": st.one_of(st.just(""), st.just("  "), st.integers(), st.builds(list)),
    "capabilities": st.one_of(
        st.dictionaries(st.one_of(st.integers(), st.just("")), scalars, min_size=1, max_size=2),
        st.dictionaries(st.text(min_size=1, max_size=3), st.builds(list), min_size=1,
                        max_size=2),
        st.dictionaries(st.text(min_size=1, max_size=3), st.sampled_from(
            [float("nan"), float("inf"), None]), min_size=1, max_size=2),
        st.integers(), st.text(max_size=3)),
    "bind": st.one_of(st.just(""), st.integers(), st.none(), st.builds(list),
                      st.sampled_from(["nope", "10.0.0", "::1", "localhost "])),
    "store_url": st.one_of(st.integers(), st.builds(list), st.sampled_from(
        ["not a url", "mysql://x/y", "nosuch://x", "", "redis://u:secret@h/0"])),
    "data_dir": st.one_of(st.integers(), st.builds(list), st.builds(dict)),
}


@FAST
@given(st.sampled_from(sorted(system_values)).flatmap(
    lambda name: st.tuples(st.just(name), system_values[name])))
def test_bad_system_options_are_refused_before_anything_starts(
        tmp_path_factory: pytest.TempPathFactory, option: tuple[str, Any]) -> None:
    """Every drawn value is invalid: refused with ConfigError naming the option,
    before the data dir is created or any process started."""
    name, value = option
    if name == "base" and value == "multiprocTCPBase":
        return
    data_dir = tmp_path_factory.mktemp("sys") / "data"
    started = len(STARTED_SESSIONS)
    try:
        accepted = hy.AgentSystem(value) if name == "data_dir" else \
            hy.AgentSystem(data_dir, **{name: value})
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        assert_refusal(exc, {name})
    else:
        accepted.shutdown()
        pytest.fail(f"AgentSystem({name}={value!r}) was accepted")
    assert len(STARTED_SESSIONS) == started
    assert not Path(data_dir).exists()
