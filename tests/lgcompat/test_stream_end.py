"""A stream whose live channel lost a message ends anyway: once the run's
invocation has ended, what its stream lacks comes from the store's log."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import hayata_py as hy
from hayata_py import langgraph as hylg
from hayata_py._inbox import Inbox
from tests.lgcompat import graphs

pytestmark = pytest.mark.timeout(90)



def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


@pytest.mark.parametrize("lost", ["node_partial_result", "invocation_completed"])
def test_a_stream_that_lost_a_message_ends_with_every_chunk(
        system: hy.AgentSystem, monkeypatch: pytest.MonkeyPatch, lost: str) -> None:
    app = hylg.compile(graphs.sequence, system, id=f"seq-lost-{lost.split('_')[-1]}")
    given = {"text": "", "steps": []}
    expected = list(app.stream(given, _config(), stream_mode=["updates", "values"]))

    dropped: list[int] = []
    lock = threading.Lock()
    original = Inbox._file

    def losing(inbox: Inbox, sender: Any, message: Any) -> None:
        with lock:
            if not dropped and getattr(message, "type", None) == lost:
                dropped.append(message.sequence)
                return  # lost on the way: the agent sent it, nothing arrives
        original(inbox, sender, message)

    monkeypatch.setattr(Inbox, "_file", losing)
    got = list(app.stream(given, _config(), stream_mode=["updates", "values"]))
    assert dropped, f"no {lost} event went through the inbox"
    assert got == expected
