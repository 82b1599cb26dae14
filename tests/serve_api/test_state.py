"""A thread's state: get, update, history."""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import BadRequestError, NotFoundError

from tests.serve_api.support import STEPS

pytestmark = pytest.mark.timeout(60)

DONE = ["s:first", "s:middle", "s:last"]


@pytest.fixture
def ran(client: SyncLangGraphClient, thread_id: str) -> str:
    """A thread on which one run of ``steps`` (label ``s``) has finished."""
    client.runs.wait(thread_id, STEPS, input={"label": "s"})
    return thread_id


def test_get_state_after_a_run(client: SyncLangGraphClient, ran: str) -> None:
    """``GET /threads/{t}/state`` gives the values, no next node, and the head checkpoint."""
    state = client.threads.get_state(ran)
    assert state["values"] == {"label": "s", "steps": DONE}
    assert state["next"] == []
    assert state["checkpoint"]["thread_id"] == ran
    assert state["checkpoint"]["checkpoint_ns"] == ""
    assert state["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert state["metadata"]["step"] == 3
    assert state["parent_checkpoint"] is not None


def test_get_state_of_unknown_thread_is_404(client: SyncLangGraphClient) -> None:
    """``GET /threads/{unknown}/state`` is a 404."""
    with pytest.raises(NotFoundError):
        client.threads.get_state(str(uuid.uuid4()))


def test_history_is_newest_first(client: SyncLangGraphClient, ran: str) -> None:
    """``POST /threads/{t}/history`` lists the checkpoints newest first (input step -1 last)."""
    history = client.threads.get_history(ran)
    assert [h["metadata"]["step"] for h in history] == [3, 2, 1, 0, -1]
    assert [h["next"] for h in history] == [[], ["last"], ["middle"], ["first"], ["__start__"]]
    assert history[0]["checkpoint"] == client.threads.get_state(ran)["checkpoint"]


def test_history_limit(client: SyncLangGraphClient, ran: str) -> None:
    """``limit`` keeps the newest checkpoints only."""
    assert [h["metadata"]["step"] for h in client.threads.get_history(ran, limit=2)] == [3, 2]


def test_history_before(client: SyncLangGraphClient, ran: str) -> None:
    """``before`` (a config naming a checkpoint id) lists only the checkpoints older than it."""
    second = client.threads.get_history(ran)[1]["checkpoint"]["checkpoint_id"]
    before = {"configurable": {"checkpoint_id": second}}
    older = client.threads.get_history(ran, before=before)  # type: ignore[arg-type]
    assert [h["metadata"]["step"] for h in older] == [1, 0, -1]


def test_get_state_at_a_checkpoint(client: SyncLangGraphClient, ran: str) -> None:
    """``GET /threads/{t}/state/{checkpoint_id}`` gives the state as it was then."""
    history = client.threads.get_history(ran)
    first_done = history[2]
    assert first_done["metadata"]["step"] == 1
    then = client.threads.get_state(ran, checkpoint_id=first_done["checkpoint"]["checkpoint_id"])
    assert then["values"]["steps"] == ["s:first"]
    assert then["next"] == ["middle"]


def test_update_state_applies_reducers(client: SyncLangGraphClient, ran: str) -> None:
    """``POST /threads/{t}/state`` writes through the reducers and answers the new checkpoint."""
    answer = client.threads.update_state(ran, {"steps": ["manual"]})
    state = client.threads.get_state(ran)
    assert answer["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert state["values"]["steps"] == [*DONE, "manual"]
    assert state["metadata"]["source"] == "update"


def test_update_state_as_node(client: SyncLangGraphClient, ran: str) -> None:
    """``as_node`` writes as that node: the thread's next node is the one after it."""
    client.threads.update_state(ran, {"steps": ["as-middle"]}, as_node="middle")
    state = client.threads.get_state(ran)
    assert state["values"]["steps"] == [*DONE, "as-middle"]
    assert state["next"] == ["last"]


def test_update_state_before_any_run_is_400(client: SyncLangGraphClient, thread_id: str) -> None:
    """Updating the state of a thread that never ran (no graph yet) is a 400."""
    with pytest.raises(BadRequestError):
        client.threads.update_state(thread_id, {"steps": ["x"]})


def test_run_from_an_older_checkpoint_forks(client: SyncLangGraphClient, ran: str) -> None:
    """An older ``checkpoint`` forks: a ``fork`` copy of it, then the run; the old branch stays."""
    history = client.threads.get_history(ran, limit=100)
    after_first = history[2]
    assert after_first["next"] == ["middle"]
    values = client.runs.wait(ran, STEPS, input=None, checkpoint=after_first["checkpoint"])
    assert values == {"label": "s", "steps": DONE}
    forked = client.threads.get_history(ran, limit=100)
    new = forked[:len(forked) - len(history)]
    assert [h["metadata"]["source"] for h in new] == ["loop", "loop", "fork"]
    fork = new[-1]
    assert fork["values"] == after_first["values"]
    assert fork["parent_checkpoint"]["checkpoint_id"] == after_first["checkpoint"]["checkpoint_id"]
    assert forked[len(new):] == history, "the old branch stays in the history"


def test_run_from_the_head_checkpoint_continues(client: SyncLangGraphClient, ran: str) -> None:
    """A run given the head ``checkpoint`` is a normal continuation of the thread."""
    head = client.threads.get_state(ran)["checkpoint"]
    values = client.runs.wait(ran, STEPS, input={"label": "t"}, checkpoint=head)
    assert values["steps"] == [*DONE, "t:first", "t:middle", "t:last"]
