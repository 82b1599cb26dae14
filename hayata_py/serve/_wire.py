"""The wire format of LangGraph's Agent Server API: request bodies (validated
at the boundary: a 422 naming the field) and the shapes of the answers.

Nothing here runs anything: the endpoints parse with these models, call the
runner, and shape what it returns with these functions.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from hayata_py.serve._db import RunRow, ThreadRow

__all__ = [
    "AssistantSearch", "BadRequest", "HistoryRequest", "RunCreate", "StateUpdate",
    "StoreKey", "StoreNamespaces", "StorePut", "StoreSearch",
    "ThreadCreate", "ThreadPatch", "ThreadSearch", "iso", "jsonable", "parse", "run_json",
    "state_json", "thread_json",
]

STREAM_MODES = ("values", "messages", "messages-tuple", "updates", "events", "debug",
                "custom", "tasks", "checkpoints")
StreamMode = Literal["values", "messages", "messages-tuple", "updates", "events", "debug",
                     "custom", "tasks", "checkpoints"]


class BadRequest(Exception):
    """A request refused before anything is written: its status and detail."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ThreadCreate(_Body):
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None


class ThreadPatch(_Body):
    metadata: dict[str, Any] | None = None


class ThreadSearch(_Body):
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class AssistantSearch(_Body):
    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class StateUpdate(_Body):
    values: Any = None
    as_node: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None


class HistoryRequest(_Body):
    limit: int = Field(default=10, ge=1, le=1000)
    before: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None


class Command(_Body):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(_Body):
    assistant_id: str
    input: Any = None
    command: Command | None = None
    stream_mode: StreamMode | list[StreamMode] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: float | None = Field(default=None, ge=0)
    durability: str | None = None
    webhook: str | None = None

    @property
    def modes(self) -> list[str]:
        return [self.stream_mode] if isinstance(self.stream_mode, str) \
            else list(self.stream_mode)

    @property
    def start_checkpoint(self) -> str | None:
        if self.checkpoint_id:
            return self.checkpoint_id
        found = (self.checkpoint or {}).get("checkpoint_id")
        return found if isinstance(found, str) else None


Namespace = list[Annotated[str, StringConstraints(min_length=1, pattern=r"^[^.]+$")]]


class StorePut(_Body):
    namespace: Namespace
    key: str
    value: dict[str, Any]
    index: Literal[False] | list[Annotated[str, StringConstraints(min_length=1)]] | None = None
    ttl: float | None = None


class StoreKey(_Body):
    namespace: Namespace
    key: str


class StoreSearch(_Body):
    namespace_prefix: Namespace = []
    filter: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    query: str | None = None


class StoreNamespaces(_Body):
    prefix: Namespace = []
    suffix: Namespace = []
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


B = TypeVar("B", bound=_Body)


def parse(model: type[B], raw: bytes) -> B:
    """``raw`` as a ``model``; a 422 naming the first field that is wrong."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise BadRequest(422, "Invalid JSON in request body") from exc
    if not isinstance(data, dict):
        raise BadRequest(422, f"the request body must be a JSON object ({model.__name__})")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequest(422, f"{field}: {first['msg']} ({model.__name__}, "
                         f"field {field!r})") from exc


def check_uuid(value: str, what: str) -> str:
    try:
        uuid.UUID(value)
    except ValueError as exc:
        raise BadRequest(422, f"Invalid {what} ID: must be a UUID") from exc
    return value


def iso(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).isoformat()


def jsonable(obj: Any) -> Any:
    """``obj`` as JSON values: LangChain messages as their dicts (``type``,
    ``id``, ``content``, ``tool_calls``), LangGraph interrupts as ``{value, id}``."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return jsonable(dump())
    if type(obj).__name__ == "Interrupt" and hasattr(obj, "value"):
        return {"value": jsonable(obj.value), "id": getattr(obj, "id", None)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, (datetime.datetime, datetime.date)):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    return repr(obj)


def thread_json(row: ThreadRow, values: Any = None, interrupts: Any = None,
                ran: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "thread_id": row.thread_id, "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at), "state_updated_at": iso(row.updated_at),
        "metadata": row.metadata, "status": row.status, "config": {}, "values": values}
    if ran:
        out["interrupts"] = interrupts or {}
        out["error"] = row.error
    return out


def run_json(row: RunRow) -> dict[str, Any]:
    return {"run_id": row.run_id, "thread_id": row.thread_id,
            "assistant_id": row.assistant_id, "metadata": row.metadata,
            "status": row.status, "kwargs": row.kwargs,
            "multitask_strategy": row.multitask_strategy,
            "created_at": iso(row.created_at), "updated_at": iso(row.updated_at)}


def _checkpoint(config: Any) -> dict[str, Any] | None:
    if not config:
        return None
    configurable = config.get("configurable") or {}
    return {"thread_id": configurable.get("thread_id"),
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": configurable.get("checkpoint_id")}


def state_json(snapshot: Any) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the API's ``ThreadState``."""
    checkpoint = _checkpoint(snapshot.config)
    parent = _checkpoint(snapshot.parent_config)
    tasks = [{"id": t.id, "name": t.name, "path": jsonable(t.path),
              "error": repr(t.error) if t.error is not None else None,
              "interrupts": [{"id": i.id, "value": jsonable(i.value)} for i in t.interrupts],
              "checkpoint": None, "state": None, "result": jsonable(t.result)}
             for t in snapshot.tasks]
    return {"values": jsonable(snapshot.values), "next": list(snapshot.next), "tasks": tasks,
            "metadata": jsonable(snapshot.metadata), "created_at": snapshot.created_at,
            "checkpoint": checkpoint, "parent_checkpoint": parent,
            "interrupts": [{"id": i.id, "value": jsonable(i.value)}
                           for i in getattr(snapshot, "interrupts", ())],
            "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
            "parent_checkpoint_id": parent["checkpoint_id"] if parent else None}


def empty_state() -> dict[str, Any]:
    return {"values": {}, "next": [], "tasks": [], "metadata": None, "created_at": None,
            "checkpoint": None, "parent_checkpoint": None, "interrupts": [],
            "checkpoint_id": None, "parent_checkpoint_id": None}
