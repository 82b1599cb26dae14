"""A thread's LangGraph checkpoints as bytes, and LangGraph values as stored data.

Between two decisions of an invocation, and from one invocation of a thread
to the next, the thread's checkpoints travel as a snapshot of LangGraph's own
:class:`InMemorySaver` (its checkpoints, pending writes and channel blobs,
each already serialized by LangGraph's serializer). Loaded again, that saver
gives LangGraph's loop, ``get_state`` and ``get_state_history`` exactly what
LangGraph's own checkpointer would.

Values that go from one hayata process to another (a task's writes, stream
chunks, the graph's input and output) are pickled, as Thespian pickles its
messages: they are Python objects made by the graph's own code, and a node's
writes must reach LangGraph's loop as the node made them.
"""

from __future__ import annotations

import pickle
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver


def dump_saver(saver: InMemorySaver) -> bytes:
    """The saver's whole content as bytes (plain containers of str and bytes)."""
    storage = {thread: {ns: dict(by_id) for ns, by_id in by_ns.items()}
               for thread, by_ns in saver.storage.items()}
    writes = {key: dict(value) for key, value in saver.writes.items()}
    return pickle.dumps((storage, writes, dict(saver.blobs)), protocol=5)


def load_saver(data: bytes | None) -> InMemorySaver:
    """A fresh :class:`InMemorySaver` holding what :func:`dump_saver` wrote."""
    saver = InMemorySaver()
    if not data:
        return saver
    storage, writes, blobs = pickle.loads(data)
    for thread, by_ns in storage.items():
        for ns, by_id in by_ns.items():
            saver.storage[thread][ns].update(by_id)
    for key, value in writes.items():
        saver.writes[key] = dict(value)
    saver.blobs.update(blobs)
    return saver


def dump_value(value: Any) -> bytes:
    """A LangGraph value (messages, Sends, Commands, interrupts, ...) as bytes."""
    return pickle.dumps(value, protocol=5)


def load_value(data: bytes) -> Any:
    """The value :func:`dump_value` stored."""
    return pickle.loads(data)
