"""Bad values from user code reach real actors: refused by code, nothing crashes.

A node returning or streaming what the store cannot hold, and a policy
answering garbage, each end their invocation with a stable error code naming
the node or the field; the agent stays ready for the next run, its processes
are the same, and the store records the node's task as failed, not completed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.store import open_store
from tests.helpers import pids

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bad_agent(tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[hy.AgentSystem, hy.AgentRef]]:
    data = tmp_path_factory.mktemp("bad") / "data"
    with hy.AgentSystem(data) as system:
        agent = system.start_agent(hy.AgentConfig(
            "bad-input", {"bad": "tests.bad_nodes:bad"}, "tests.bad_nodes:policy"))
        yield system, agent


@pytest.mark.parametrize(
    ("node", "code", "details"),
    [
        ("list", "invalid_node_result", {"node_id": "bad", "returned": "list"}),
        ("set", "invalid_node_result", {"node_id": "bad", "key": "result.tags"}),
        ("big_int", "invalid_node_result", {"node_id": "bad", "key": "result.n"}),
        ("int_key", "invalid_node_result", {"node_id": "bad", "key": "result.by_id"}),
        ("object", "invalid_node_result", {"node_id": "bad", "key": "result.when"}),
        ("cycle", "invalid_node_result", {"node_id": "bad"}),
        ("partial_list", "node_failed", {"node_id": "bad", "type": "InvalidPartialResult"}),
        ("partial_object", "node_failed", {"node_id": "bad", "type": "EncodingError"}),
    ],
)
def test_bad_node_values_fail_the_invocation_not_the_actors(
        bad_agent: tuple[hy.AgentSystem, hy.AgentRef], node: str, code: str,
        details: dict[str, Any]) -> None:
    system, agent = bad_agent
    before = pids(system)
    inv = agent.run({"node": node}, subscriber=hy.CALLER, stream=True)
    result = agent.wait(inv, 30)
    assert not result.ok and result.error is not None
    assert result.error.code == code, result.error
    assert details.items() <= result.error.details.items(), result.error
    _assert_ready(system, agent, before)
    with open_store(system.store_url) as store:
        (task,) = store.get_tasks(inv)
    assert task.status == "failed" and task.result is None
    assert task.error is not None and task.error["code"] == code


@pytest.mark.parametrize(
    ("policy", "field"),
    [("finish_object", "result"), ("next_int_key", "input"), ("next_object_node", "node"),
     ("none", "answer")],
)
def test_bad_policy_answers_fail_the_invocation_not_the_agent(
        bad_agent: tuple[hy.AgentSystem, hy.AgentRef], policy: str, field: str) -> None:
    system, agent = bad_agent
    before = pids(system)
    result = agent.wait(agent.run({"policy": policy}), 30)
    assert not result.ok and result.error is not None
    assert result.error.code == "invalid_policy_result", result.error
    assert result.error.details["field"] == field, result.error
    _assert_ready(system, agent, before)
    with open_store(system.store_url) as store:
        assert store.get_tasks(result.invocation_id) == []


def _assert_ready(system: hy.AgentSystem, agent: hy.AgentRef, before: set[int]) -> None:
    """The agent is idle, no process was replaced, and a good run succeeds."""
    assert agent.status() == "idle"
    assert pids(system) == before
    good = agent.wait(agent.run({"node": "ok"}), 30)
    assert good.ok and good.result == {"fine": [1, "two", None]}, good


def test_the_bad_values_really_are_unstorable() -> None:
    """Guard: else the tests above would prove nothing."""
    from hayata_py._codec import check_encodable
    from tests import bad_nodes

    for name, make in bad_nodes.NODE_RESULTS.items():
        if name in ("ok", "list") or name.startswith("partial"):
            continue
        with pytest.raises(hy.EncodingError):
            check_encodable(make(None), "result")  # type: ignore[arg-type]
