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

import inspect
import pickle
from collections import defaultdict
from contextlib import ExitStack
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

_SERDE = InMemorySaver().serde


class Saver(InMemorySaver):
    """LangGraph's :class:`InMemorySaver`, cheaper to make and to open a loop
    on: a run's decisions and tasks each make one or two.

    - It is made with what ``InMemorySaver.__init__`` sets (the same
      serializer, empty storage), without that check of the serializer's type
      (a ``Protocol`` ``isinstance``, the better part of making one).
    - LangGraph's loop reads the signature of ``put_writes`` each time it is
      opened (does it take ``task_path``?): it is computed here once.
    """

    def __init__(self) -> None:
        self.serde = _SERDE
        self.storage = defaultdict(lambda: defaultdict(dict))
        self.writes = defaultdict(dict)
        self.blobs = defaultdict()
        self.stack = ExitStack()

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str,
                   task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)


setattr(Saver.put_writes, "__signature__", inspect.signature(Saver.put_writes))  # noqa: B010


def dump_saver(saver: InMemorySaver) -> bytes:
    """The saver's whole content as bytes (plain containers of str and bytes)."""
    storage = {thread: {ns: dict(by_id) for ns, by_id in by_ns.items()}
               for thread, by_ns in saver.storage.items()}
    writes = {key: dict(value) for key, value in saver.writes.items()}
    return pickle.dumps((storage, writes, dict(saver.blobs)), protocol=5)


def load_saver(data: bytes | None) -> InMemorySaver:
    """A fresh :class:`InMemorySaver` holding what :func:`dump_saver` wrote."""
    saver = Saver()
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


def head_id(saver: InMemorySaver, thread: str) -> str | None:
    """The id of the thread's latest checkpoint (LangGraph's ids grow with time)."""
    by_id = saver.storage.get(thread, {}).get("", {})
    return max(by_id) if by_id else None


def trim_saver(saver: InMemorySaver, thread: str, since: str | None) -> InMemorySaver:
    """Only what a run's next steps need: the thread's checkpoints from
    ``since`` (the head when the run started) on, with their channel blobs and
    pending writes; other namespaces whole. A run's steps carry this, not the
    thread's whole history (see :func:`merge_saver`)."""
    out = Saver()
    kept: set[str] = set()
    for ns, by_id in saver.storage.get(thread, {}).items():
        if ns != "":
            out.storage[thread][ns].update(by_id)
            continue
        for checkpoint_id, entry in by_id.items():
            if since is None or checkpoint_id >= since:
                out.storage[thread][ns][checkpoint_id] = entry
                kept.add(checkpoint_id)
    versions: set[tuple[str, Any]] = set()
    for checkpoint_id in kept:
        checkpoint = saver.serde.loads_typed(saver.storage[thread][""][checkpoint_id][0])
        versions.update(checkpoint["channel_versions"].items())
    for key, value in saver.writes.items():
        if key[0] == thread and (key[1] != "" or key[2] in kept):
            out.writes[key] = dict(value)
    for blob_key, blob in saver.blobs.items():
        if blob_key[0] == thread and (blob_key[1] != "" or (blob_key[2], blob_key[3]) in versions):
            out.blobs[blob_key] = blob
    return out


def merge_saver(base: InMemorySaver, new: InMemorySaver) -> InMemorySaver:
    """``base`` (a thread's history) with what a run added in ``new`` (which
    started as :func:`trim_saver` of it): new checkpoints, their blobs, and the
    latest view of each checkpoint's pending writes."""
    for thread, by_ns in new.storage.items():
        for ns, by_id in by_ns.items():
            base.storage[thread][ns].update(by_id)
    for key, value in new.writes.items():
        base.writes[key] = dict(value)
    base.blobs.update(new.blobs)
    return base


def subgraph_saver(saver: InMemorySaver, thread: str) -> InMemorySaver | None:
    """The checkpoints of the thread's subgraphs (every namespace but the
    graph's own), or None if there are none."""
    nested = {ns: by_id for ns, by_id in saver.storage.get(thread, {}).items()
              if ns != "" and by_id}
    if not nested:
        return None
    out = Saver()
    for ns, by_id in nested.items():
        out.storage[thread][ns].update(by_id)
    for key, value in saver.writes.items():
        if key[0] == thread and key[1] != "":
            out.writes[key] = dict(value)
    for blob_key, blob in saver.blobs.items():
        if blob_key[0] == thread and blob_key[1] != "":
            out.blobs[blob_key] = blob
    return out
