"""The CALLER inbox's blocking readers (pure: no processes): each waits on its
own stream, and a stream a reader waits on is never dropped to make room."""

from __future__ import annotations

import threading
import time

import pytest

from hayata_py import _inbox
from hayata_py._actor_messages import EventBatch
from hayata_py._errors import HayataError
from hayata_py._inbox import Inbox
from hayata_py.messages import AgentEvent, AgentResult

pytestmark = pytest.mark.timeout(20)


def _until(condition: threading.Event, what: str) -> None:
    assert condition.wait(10), f"{what} within 10 s"


def test_readers_of_many_streams_each_get_their_own_run() -> None:
    inbox = Inbox()
    runs = [f"inv-{i}" for i in range(50)]
    for inv in runs:
        inbox.expect(inv, "agent", streamed=True)
    got: dict[str, list[object]] = {}
    waiting = threading.Barrier(len(runs) + 1)

    def read(inv: str) -> None:
        waiting.wait()
        got[inv] = [inbox.next_message(inv, 10) for _ in range(2)]

    readers = [threading.Thread(target=read, args=(inv,)) for inv in runs]
    for reader in readers:
        reader.start()
    waiting.wait()
    # one batch for every run, as an agent's event-log write sends them
    inbox.deliver("agent", EventBatch(tuple(
        m for inv in reversed(runs) for m in (
            AgentEvent(inv, "invocation_completed", 1, {"of": inv}),
            AgentResult(inv, True, result=inv)))))
    for reader in readers:
        reader.join(10)
        assert not reader.is_alive()
    for inv in runs:
        event, result = got[inv]
        assert isinstance(event, AgentEvent) and event.data == {"of": inv}
        assert isinstance(result, AgentResult) and result.result == inv


def test_a_stream_a_reader_waits_on_is_not_dropped_for_room(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_inbox, "MAX_STREAMS", 3)
    inbox = Inbox()
    inbox.expect("waited", "agent", streamed=True)
    started = threading.Event()
    out: list[object] = []

    def read() -> None:
        started.set()
        out.append(inbox.next_message("waited", 10))

    reader = threading.Thread(target=read)
    reader.start()
    _until(started, "the reader started")
    deadline = time.monotonic() + 10
    while not inbox._waits and time.monotonic() < deadline:  # its wait has begun
        time.sleep(0.005)
    for i in range(5):  # more streams than the inbox keeps
        inbox.expect(f"other-{i}", "agent", streamed=False)
    assert inbox.follows("waited")
    assert not inbox.follows("other-0")  # the oldest idle ones made room
    inbox.deliver("agent", AgentResult("waited", True, result=1))
    inbox.deliver("agent", AgentEvent("waited", "invocation_completed", 1, {}))
    reader.join(10)
    assert isinstance(out[0], AgentEvent)
    with pytest.raises(HayataError) as dropped:
        inbox.take("other-0")
    assert dropped.value.code == "not_found"
