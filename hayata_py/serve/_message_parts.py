"""The ``messages`` stream mode as LangGraph's server sends it, made from the
run's logged ``messages`` events (each a ``[message, metadata]`` pair, which
is what ``messages-tuple`` sends as it is).

For each message id the first chunk gives ``messages/metadata``
(``{id: {"metadata": ...}}``); then every chunk gives ``messages/partial``
with the message so far (its chunks added up, as a whole message: ``type``
``ai``, not ``AIMessageChunk``); a message that is not a chunk gives
``messages/complete``. Both carry the logged event's id, so a reader resuming
from ``Last-Event-ID`` gets the rest; :meth:`MessageParts.prime` adds up what
came before it first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import (
    AIMessageChunk,
    BaseMessage,
    BaseMessageChunk,
    ToolMessageChunk,
    convert_to_messages,
    message_chunk_to_message,
)

from hayata_py.serve._wire import jsonable

__all__ = ["MessageParts"]


def _message(data: dict[str, Any]) -> BaseMessage:
    kind = str(data.get("type", ""))
    fields = {k: v for k, v in data.items() if k != "type"}
    if "chunk" in kind.lower():
        if "tool" in kind.lower():
            return ToolMessageChunk(**fields)
        return AIMessageChunk(**fields)
    return convert_to_messages([data])[0]


class MessageParts:
    """One reader's sums of the messages streamed so far."""

    def __init__(self) -> None:
        self.sums: dict[str, BaseMessage] = {}

    def _add(self, raw: str) -> tuple[BaseMessage, dict[str, Any], bool] | None:
        """Add one logged ``messages`` event: the message so far, its metadata,
        and whether it is its first part; None for one that is not a pair."""
        pair = json.loads(raw)
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], dict)):
            return None
        message = _message(pair[0])
        key = str(message.id)
        first = key not in self.sums
        so_far = self.sums.get(key)
        if isinstance(so_far, BaseMessageChunk) and isinstance(message, BaseMessageChunk):
            self.sums[key] = so_far + message
        else:
            self.sums[key] = message
        return self.sums[key], pair[1] if isinstance(pair[1], dict) else {}, first

    def prime(self, logged: Iterable[str]) -> None:
        """Add up the ``messages`` events before the one a reader resumes after."""
        for raw in logged:
            self._add(raw)

    def events(self, raw: str) -> list[tuple[str, str]]:
        """The ``(event, data)`` pairs one logged ``messages`` event gives."""
        added = self._add(raw)
        if added is None:
            return []
        whole, metadata, first = added
        out: list[tuple[str, str]] = []
        if first:
            out.append(("messages/metadata",
                        json.dumps({str(whole.id): {"metadata": metadata}})))
        if isinstance(whole, BaseMessageChunk):
            out.append(("messages/partial", json.dumps(
                [jsonable(message_chunk_to_message(whole))])))
        else:
            out.append(("messages/complete", json.dumps([jsonable(whole)])))
        return out
