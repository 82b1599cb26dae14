"""Bad input, systematically: store rows that are garbage, truncated or from a newer format.

One column of one row of a real store (SQLite and PostgreSQL) is overwritten
with drawn bytes or values; then every read and write of the store is tried.
Each either works on a well-formed record or raises a store error
(``CorruptRecord``/``SchemaTooNew`` naming the record and the column, or the
ordinary refusals such as ``stale_writer``), and a refused call leaves every
row exactly as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hayata_py as hy
from hayata_py._codec import encode
from hayata_py.store import (
    ActiveExecution,
    InvocationRecord,
    SqlTaskStore,
    TaskRecord,
)
from hayata_py.store._records import INVOCATION_STATUSES, TASK_STATUSES
from tests.bad_input import FAST, plain
from tests.store.util import invocation, task

STORE_EXAMPLES = settings(FAST, max_examples=40, suppress_health_check=[
    *FAST.suppress_health_check, HealthCheck.function_scoped_fixture])
"""Each example makes its own invocation in the test's store."""

INVOCATION_VALUES = ("state", "input", "active_execution", "parallel_results", "last_result",
                     "result", "error")
TASK_VALUES = ("input", "result", "error")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'hayata.db'}"
    pg_url: str = request.getfixturevalue("pg_url")
    return pg_url


@pytest.fixture
def db(url: str) -> Iterator[tuple[SqlTaskStore, sa.Engine]]:
    store = SqlTaskStore(url)
    engine = sa.create_engine(url)
    try:
        yield store, engine
    finally:
        engine.dispose()
        store.close()


class Case:
    """One invocation with a scheduled, a started and a completed task."""

    def __init__(self, store: SqlTaskStore) -> None:
        self.iid = f"inv-{uuid.uuid4().hex[:8]}"
        self.agent = f"agent-{uuid.uuid4().hex[:8]}"
        self.record = invocation(self.iid, self.agent)
        self.token = store.create_invocation(self.record, owner="o1", lease_seconds=60)
        self.tasks = {name: task(name, invocation_id=self.iid) for name in ("a", "b", "c")}
        store.schedule_tasks(list(self.tasks.values()), token=self.token)
        for name in ("b", "c"):
            store.mark_started(self.tasks[name].task_id, token=self.token,
                               system_instance="s1", attempt=1)
        store.mark_completed(self.tasks["c"].task_id, token=self.token, result={"c": 1})

    def rows(self, engine: sa.Engine) -> list[tuple[Any, ...]]:
        with engine.connect() as conn:
            inv = conn.execute(sa.text("SELECT * FROM hayata_invocations WHERE invocation_id"
                                       " = :i"), {"i": self.iid}).all()
            tks = conn.execute(sa.text("SELECT * FROM hayata_tasks WHERE invocation_id = :i "
                                       "ORDER BY task_id"), {"i": self.iid}).all()
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                for r in [*inv, *tks]]

    def operations(self, store: SqlTaskStore, engine: sa.Engine
                   ) -> list[tuple[str, Callable[[], Any]]]:
        a, b, c = (self.tasks[n].task_id for n in "abc")
        tok = self.token
        checkpoint = replace(self.record, step=1, state={"n": 2})
        return [
            ("get_invocation", lambda: store.get_invocation(self.iid)),
            ("unfinished_invocation", lambda: store.unfinished_invocation(self.agent)),
            ("list_invocations", lambda: store.list_invocations(self.agent)),
            ("get_tasks", lambda: store.get_tasks(self.iid)),
            ("get_task", lambda: [store.get_task(t) for t in (a, b, c)]),
            ("save_checkpoint", lambda: store.save_checkpoint(checkpoint, token=tok)),
            ("renew_lease", lambda: store.renew_lease(self.iid, owner="o1", token=tok,
                                                      lease_seconds=30)),
            ("mark_started", lambda: store.mark_started(b, token=tok, system_instance="s2",
                                                        attempt=2)),
            ("mark_started_new", lambda: store.mark_started(
                "task-new", token=tok, system_instance="s1", attempt=1,
                task=TaskRecord("task-new", self.iid, "ex-1", 1, "a"))),
            ("mark_completed", lambda: store.mark_completed(b, token=tok, result={"b": 2})),
            ("mark_completed_again", lambda: store.mark_completed(c, token=tok,
                                                                  result={"c": 1})),
            ("mark_failed", lambda: store.mark_failed(a, token=tok, error={"code": "x"})),
            ("resolve_task", lambda: store.resolve_task(b, result={"b": 3}, token=tok)),
            ("claim_invocation", lambda: store.claim_invocation(self.iid, owner="o1")),
            ("finish_invocation", lambda: store.finish_invocation(
                self.iid, token=store_token(engine, self.iid), status="completed",
                result={"done": True})),
            ("release", lambda: store.release(self.iid, owner="o1",
                                              token=store_token(engine, self.iid))),
        ]


def store_token(engine: sa.Engine, iid: str) -> int:
    """The current token (read raw: the record itself may be unreadable)."""
    with engine.connect() as conn:
        token: int = conn.execute(sa.text("SELECT token FROM hayata_invocations WHERE "
                                          "invocation_id = :i"), {"i": iid}).scalar_one()
    return token


def _well_formed(value: Any) -> None:
    """A record a read returned holds only what its fields promise."""
    records = value if isinstance(value, list) else [value]
    for record in records:
        if isinstance(record, InvocationRecord):
            assert record.status in INVOCATION_STATUSES and isinstance(record.step, int)
            assert isinstance(record.state, dict)
            assert record.error is None or isinstance(record.error, dict)
            assert record.parallel_results is None or isinstance(record.parallel_results, list)
            active = record.active_execution
            assert active is None or (isinstance(active, ActiveExecution)
                                      and isinstance(active.execution_id, str)
                                      and all(isinstance(n, str) for n in active.node_ids))
            assert record.format_version == 1
        elif isinstance(record, TaskRecord):
            assert record.status in TASK_STATUSES
            assert record.error is None or isinstance(record.error, dict)


valid_bytes = plain.filter(lambda v: _encodes(v)).map(lambda v: encode(v, key="v"))


def _encodes(value: Any) -> bool:
    try:
        encode(value, key="v")
    except hy.EncodingError:
        return False
    return True


column_bytes = st.one_of(
    st.binary(max_size=24),  # garbage
    valid_bytes.flatmap(lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda n: b[:n])),
    valid_bytes.flatmap(lambda b: st.integers(0, 255).map(lambda v: bytes([v]) + b[1:])),
    valid_bytes,  # a well-formed value, maybe of the wrong kind for the column
    st.just(b"\x01" + b"\x91" * 300 + b"\x00"),  # nested deeper than the codec reads
    st.sampled_from([encode({"execution_id": "e", "step": 0, "node_ids": "ab"}, key="v"),
                     encode({"execution_id": 1, "step": "0", "node_ids": []}, key="v"),
                     encode({"step": 0}, key="v")]),
)

# A status any store can hold: PostgreSQL's text columns refuse NUL, so no row
# there can carry one (SQLite's can; both stores get the same strings); and a
# lone surrogate is no UTF-8 text, so neither driver can even send it.
status_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                      max_size=16)

corruptions = st.one_of(
    st.tuples(st.just("invocation"), st.sampled_from(INVOCATION_VALUES), column_bytes),
    st.tuples(st.just("invocation"), st.just("status"),
              st.one_of(st.sampled_from(sorted(INVOCATION_STATUSES)), status_text)),
    st.tuples(st.just("invocation"), st.just("format_version"), st.integers(-2, 4)),
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(TASK_VALUES), column_bytes),
    st.tuples(st.sampled_from(["a", "b", "c"]), st.just("status"),
              st.one_of(st.sampled_from(sorted(TASK_STATUSES)), status_text)),
)


def corrupt(case: Case, engine: sa.Engine, target: str, column: str, value: Any) -> str:
    """Overwrite one column of one row; return the record name errors must give."""
    with engine.begin() as conn:
        if target == "invocation":
            conn.execute(sa.text(f"UPDATE hayata_invocations SET {column} = :v "
                                 "WHERE invocation_id = :i"), {"v": value, "i": case.iid})
            return f"invocation {case.iid}"
        tid = case.tasks[target].task_id
        conn.execute(sa.text(f"UPDATE hayata_tasks SET {column} = :v WHERE task_id = :t"),
                     {"v": value, "t": tid})
        return f"task {tid}"


@STORE_EXAMPLES
@given(corruption=corruptions)
def test_bad_rows_are_refused_naming_them_and_nothing_changes(
        db: tuple[SqlTaskStore, sa.Engine], corruption: tuple[str, str, Any]) -> None:
    store, engine = db
    case = Case(store)
    target, column, value = corruption
    record = corrupt(case, engine, target, column, value)
    for name, operation in case.operations(store, engine):
        before = case.rows(engine)
        try:
            _well_formed(operation())
        except hy.StoreError as exc:
            assert case.rows(engine) == before, f"{name} refused ({exc}) but changed rows"
            if isinstance(exc, (hy.CorruptRecord, hy.SchemaTooNew)):
                assert exc.details["record"] == record, (name, exc.details, record)
                assert exc.details["column"] == column, (name, exc.details, column)
                assert record in str(exc) and column in str(exc)


def test_a_record_from_a_newer_format_is_refused_everywhere_unchanged(
        db: tuple[SqlTaskStore, sa.Engine]) -> None:
    """Regression: the row's format_version was never read; an older hayata_py read
    it as its own and its writes mixed formats in one record."""
    store, engine = db
    case = Case(store)
    corrupt(case, engine, "invocation", "format_version", 2)
    before = case.rows(engine)
    refused = []
    for name, operation in case.operations(store, engine):
        if name in ("get_task", "get_tasks"):
            continue  # task rows carry no format of their own (only their values do)
        with pytest.raises(hy.StoreError) as err:
            operation()
        assert err.value.code in {"schema_too_new", "stale_writer"}, (name, err.value)
        refused.append((name, err.value.code))
        assert case.rows(engine) == before, name
    assert ("get_invocation", "schema_too_new") in refused
    assert ("claim_invocation", "schema_too_new") in refused
    assert ("save_checkpoint", "schema_too_new") in refused
    assert ("mark_completed", "schema_too_new") in refused
    with pytest.raises(hy.SchemaTooNew, match="newer hayata_py"):
        store.get_invocation(case.iid)


@pytest.mark.parametrize(
    ("target", "column", "value", "why"),
    [
        # Regressions: each of these was returned as a record of the wrong shape
        # (or, for writes, written over) instead of being refused.
        ("invocation", "state", encode([1, 2], key="v"), "holds a list"),
        ("invocation", "error", encode("boom", key="v"), "holds a str"),
        ("invocation", "parallel_results", encode({"a": 1}, key="v"), "holds a dict"),
        ("invocation", "active_execution",
         encode({"execution_id": "e", "step": 0, "node_ids": "ab"}, key="v"),
         "not an active execution"),
        ("invocation", "status", "paused", "unknown invocation status"),
        ("invocation", "format_version", 0, "not a format version"),
        ("b", "status", "half-done", "unknown task status"),
        ("a", "error", encode([1], key="v"), "holds a list"),
    ],
)
def test_wrong_kinds_in_rows_are_refused(
        db: tuple[SqlTaskStore, sa.Engine], target: str, column: str, value: Any,
        why: str) -> None:
    store, engine = db
    case = Case(store)
    record = corrupt(case, engine, target, column, value)
    before = case.rows(engine)
    read = store.get_invocation if target == "invocation" else store.get_task
    key = case.iid if target == "invocation" else case.tasks[target].task_id
    with pytest.raises(hy.CorruptRecord) as err:
        read(key)
    assert err.value.details == {"record": record, "column": column}
    assert why in str(err.value)
    write = (lambda: store.claim_invocation(case.iid, owner="o2")) if target == "invocation" \
        else (lambda: store.mark_started(key, token=case.token, system_instance="s9",
                                         attempt=5))
    with pytest.raises(hy.CorruptRecord):
        write()
    assert case.rows(engine) == before
