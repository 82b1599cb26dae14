"""Group commit: several invocations' creates, or finishes, in one transaction.

An agent serving many invocations creates and finishes them in bursts. Each
create and finish is a committed transaction with an fsync of its own; these
methods make a burst of them one transaction (one fsync), each with exactly
the checks and effects of its single form. The batch is all or nothing: if any
one of them would not land as the happy path (a busy thread, a stale token, a
finish that starts a queued run), nothing of the batch is written and each is
done on its own, so a refusal names its own invocation and the others land.
Mixed into :class:`~hayata_py.store._sqlalchemy.SqlTaskStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from hayata_py._codec import encode
from hayata_py._errors import EncodingError, StoreError
from hayata_py.store import _fast
from hayata_py.store._contract import TaskStore
from hayata_py.store._engine import EngineHolder
from hayata_py.store._records import InvocationRecord
from hayata_py.store._rows import invocation_values

Finish = tuple[str, int, str, Any, "dict[str, Any] | None", "dict[str, Any] | None"]
"""(invocation id, token, status, result, error, state) of one finish."""


class BatchWrites:
    _db: EngineHolder
    clock: Callable[[], float]
    _threaded: dict[str, bool]
    create_invocation: Callable[..., int]
    finish_invocation: Callable[..., InvocationRecord | None]
    _expiry: Callable[[float | None], float | None]
    _note_threaded: Callable[[str], None]

    def create_invocations(
        self, items: Sequence[tuple[InvocationRecord, int | None]], *, owner: str,
        lease_seconds: float | None = None, max_running: int | None = 1,
        durable: bool = True,
    ) -> list[int | StoreError]:
        if len(items) > 1 and all(v is None or r.thread_id is not None for r, v in items):
            try:
                now = float(self.clock())
                statements: _fast.Statements = []
                for record, version in items:
                    statements += _fast.create_statements(
                        self._db.is_sqlite, record.invocation_id, record.agent_id,
                        record.thread_id, invocation_values(record), owner=owner, now=now,
                        expires=self._expiry(lease_seconds), max_running=max_running,
                        thread_version=version)
            except EncodingError:
                statements = []  # each on its own says which
            if statements and self._db.write_all(statements, durable=durable):
                for record, _version in items:
                    if record.thread_id is not None:
                        self._note_threaded(record.invocation_id)
                return [1] * len(items)
        # Each on its own: the contract's plain loop.
        return TaskStore.create_invocations(cast(TaskStore, self), items, owner=owner,
                                            lease_seconds=lease_seconds,
                                            max_running=max_running, durable=durable)

    def finish_invocations(
        self, items: Sequence[Finish], *, lease_seconds: float | None = None,
    ) -> list[InvocationRecord | StoreError | None]:
        if len(items) > 1 and self._batch_finish(items):
            return [None] * len(items)
        return TaskStore.finish_invocations(cast(TaskStore, self), items,
                                            lease_seconds=lease_seconds)

    def _batch_finish(self, items: Sequence[Finish]) -> bool:
        """The happy path of every finish in one transaction (True: all landed)."""
        sqlite = self._db.is_sqlite
        now = float(self.clock())
        statements: _fast.Statements = []
        try:
            for invocation_id, token, status, result, error, state in items:
                if status not in ("completed", "failed"):
                    return False
                values: dict[str, Any] = {"result": encode(result, key="result"),
                                          "error": encode(error, key="error")}
                if state is not None:
                    values["state"] = encode(state, key="state")
                if self._threaded.get(invocation_id, False):
                    statements += _fast.finish_on_thread_statements(
                        sqlite, invocation_id, token, status, now, values)
                else:
                    stmt = (_fast.FINISH_INVOCATION if state is None
                            else _fast.FINISH_INVOCATION_WITH_STATE)
                    statements.append((stmt.text(sqlite),
                                       (status, now, *values.values(), invocation_id, token)))
        except EncodingError:
            return False
        if not self._db.write_all(statements):
            return False
        for invocation_id, *_rest in items:
            self._threaded.pop(invocation_id, None)
        return True
