"""The batching agent's outbox (``_rules/outbox.py``): per target, order kept;
tasks in a row for one edge go as one ``RunTasks``; a target still receiving
an earlier message gets nothing until it is through."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hayata_py._actor_messages import CancelRun, KillReason, RunTask, RunTasks
from hayata_py._rules.outbox import Outbox

pytestmark = pytest.mark.timeout(30)


def task(n: int) -> RunTask:
    return RunTask(f"inv:{n}", f"t{n}", "inv", "llm", {}, {}, None, False, f"k{n}")


def cancel(n: int) -> CancelRun:
    return CancelRun(f"t{n}", KillReason.TIMED_OUT)


def flat(sent: list[tuple[Any, Any]], to: str) -> list[Any]:
    out: list[Any] = []
    for target, message in sent:
        if target == to:
            out += list(message.tasks) if isinstance(message, RunTasks) else [message]
    return out


def test_tasks_in_a_row_go_as_one_message_and_others_keep_their_place() -> None:
    box = Outbox()
    assert box.put("edge", task(1)) is True  # was empty
    assert box.put("edge", task(2)) is False
    box.put("node", cancel(9))
    box.put("edge", cancel(2))
    box.put("edge", task(3))
    sent = box.take()
    assert sent == [("edge", RunTasks((task(1), task(2)))), ("edge", cancel(2)),
                    ("edge", task(3)), ("node", cancel(9))]
    assert not box and box.take() == []


def test_a_busy_target_keeps_its_messages_until_it_is_free() -> None:
    box = Outbox()
    box.put("edge", task(1))
    box.put("other", task(5))
    assert box.take(busy={"edge"}) == [("other", task(5))]
    box.put("edge", task(2))
    assert box and box.take(busy={"edge"}) == []
    assert box.take() == [("edge", RunTasks((task(1), task(2))))]


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 50),
                          st.booleans()), max_size=40),
       st.lists(st.frozensets(st.sampled_from(["a", "b", "c"])), max_size=5))
def test_every_message_goes_once_in_the_order_put_per_target(
        puts: list[tuple[str, int, bool]], busy_rounds: list[frozenset[str]]) -> None:
    box = Outbox()
    for to, n, is_task in puts:
        box.put(to, task(n) if is_task else cancel(n))
    sent: list[tuple[Any, Any]] = []
    for busy in busy_rounds:
        sent += box.take(busy)
    sent += box.take()
    assert not box
    for to in "abc":
        assert flat(sent, to) == [task(n) if t else cancel(n) for target, n, t in puts
                                  if target == to]
    assert all(len(m.tasks) >= 2 for _, m in sent if isinstance(m, RunTasks))
