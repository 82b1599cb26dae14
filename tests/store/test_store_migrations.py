"""Schema revisions: a database written at revision 0001 is upgraded in place."""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa
from alembic import command

from hayata_py._codec import FORMAT_VERSION, encode
from hayata_py._errors import StoreError
from hayata_py.store import open_store
from hayata_py.store._connect import normalize_url
from hayata_py.store._sql.engine import EngineHolder
from hayata_py.store._sql.migrate import _config
from hayata_py.store._sql.schema import HEAD_REVISION
from tests.store.test_store_threads import on_thread
from tests.store.util import raw_execute

_COLUMNS = ("invocation_id, agent_id, status, step, state, input, active_execution, "
            "parallel_results, last_result, result, error, format_version, created_at, "
            "updated_at, token, owner, lease_expires_at")


def _upgrade_to(url: str, revision: str) -> None:
    """Migrate the database at ``url`` up to ``revision`` only."""
    holder = EngineHolder(normalize_url(url))
    try:
        holder.run(lambda conn: command.upgrade(_config(conn), revision), write=True)
    finally:
        holder.dispose()


def _database_at_0001(url: str) -> None:
    """Create the schema by the first migration only, with two invocations and a
    task in it as the 0001 code wrote them."""
    _upgrade_to(url, "0001_baseline")
    none = encode(None, key="none")
    for iid, status in (("inv-done", "completed"), ("inv-old", "running")):
        raw_execute(
            url,
            f"INSERT INTO hayata_invocations ({_COLUMNS}) VALUES (:iid, 'agent-1', :status, 2, "
            ":state, :input, :none, :none, :none, :result, :none, :fv, 1.0, 2.0, 3, 'o1', NULL)",
            iid=iid, status=status, state=encode({"n": 1}, key="state"),
            input=encode("hi", key="input"), none=none, fv=FORMAT_VERSION,
            result=encode(7 if status == "completed" else None, key="result"),
        )
    raw_execute(
        url,
        "INSERT INTO hayata_tasks (task_id, invocation_id, execution_id, step, node_id, "
        "branch_index, status, input, result, error, attempt, started_at, finished_at, "
        "system_instance, resolved) VALUES ('task-1', 'inv-old', 'ex', 2, 'a', 0, 'started', "
        ":none, :none, :none, 1, 1.0, NULL, 's', false)",
        none=none,
    )


def test_upgrade_from_0001_keeps_data_and_adds_threads(store_url: str) -> None:
    """Opening a 0001 database upgrades it to the head: the old records read back
    (without a thread), the old running invocation still counts, finishes by its
    token, and threads and limits above one work."""
    _database_at_0001(store_url)
    assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [
        ("0001_baseline",)]
    with open_store(store_url) as store:
        assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [
            (HEAD_REVISION,)]
        old = store.get_invocation("inv-old")
        assert old is not None
        assert (old.status, old.step, old.state, old.input, old.thread_id) == (
            "running", 2, {"n": 1}, "hi", None)
        done = store.get_invocation("inv-done")
        assert done is not None and (done.status, done.result) == ("completed", 7)
        (task,) = store.get_tasks("inv-old")
        assert (task.task_id, task.status) == ("task-1", "started")
        assert [r.invocation_id for r in store.unfinished_invocations("agent-1")] == ["inv-old"]
        with pytest.raises(StoreError) as busy:
            store.create_invocation(on_thread("inv-new"), owner="o1")
        assert busy.value.code == "agent_busy"
        assert busy.value.details["invocation_id"] == "inv-old"
        assert store.create_invocation(on_thread("inv-new"), owner="o1", max_running=2) == 1
        assert store.finish_invocation("inv-old", token=3, status="completed") is None
        thread = store.get_thread("agent-1", "t1")
        assert thread is not None and thread.running_invocation_id == "inv-new"


def test_upgrade_replaces_the_unique_running_index(store_url: str) -> None:
    """0002 drops the one-running-invocation-per-agent unique index and indexes
    (agent_id, status) and (agent_id, thread_id, created_at)."""
    _database_at_0001(store_url)
    open_store(store_url).close()
    engine = sa.create_engine(normalize_url(store_url))
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            indexes = {ix["name"]: ix["column_names"]
                       for ix in inspector.get_indexes("hayata_invocations")}
            tables = set(inspector.get_table_names())
    finally:
        engine.dispose()
    assert "uq_hayata_invocations_running_agent" not in indexes
    assert indexes["ix_hayata_invocations_agent_status"] == ["agent_id", "status"]
    assert indexes["ix_hayata_invocations_agent_thread_created"] == [
        "agent_id", "thread_id", "created_at"]
    assert {"hayata_threads", "hayata_thread_queue"} <= tables


def test_upgrade_from_0002_adds_the_cache(store_url: str) -> None:
    """Opening a 0002 database upgrades it to 0003: its task rows read back as
    not cached, cached tasks and cache entries can be written."""
    _database_at_0001(store_url)
    _upgrade_to(store_url, "0002_threads")
    assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [
        ("0002_threads",)]
    with open_store(store_url) as store:
        assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [
            (HEAD_REVISION,)]
        assert store.get_events("inv-old") == []  # and 0004 made the event log
        (task,) = store.get_tasks("inv-old")
        assert (task.task_id, task.status, task.cached) == ("task-1", "started", False)
        assert store.cache_get("agent-1", "a", "k") is None
        store.cache_put("agent-1", "a", "k", {"r": 1}, ttl=60)
        hit = store.cache_get("agent-1", "a", "k")
        assert hit is not None and hit.result == {"r": 1}
        new = dataclasses.replace(task, task_id="task-2", node_id="b", status="scheduled")
        done = store.complete_cached(new, token=3, result={"r": 2}, attempt=1,
                                     system_instance="s")
        assert (done.status, done.cached) == ("completed", True)


def test_upgrade_from_0006_keeps_store_items_embedded_at_the_stores_fields(
        store_url: str) -> None:
    """An item written at 0006 reads back after the upgrade to 0007 with no
    fields of its own: semantic search embeds it at the store's index fields."""
    from hayata_py.langgraph import HayataStore

    _database_at_0001(store_url)
    _upgrade_to(store_url, "0006_serve_owners")
    raw_execute(store_url, "INSERT INTO hayata_serve_store_items (namespace, key, value, "
                "created_at, updated_at) VALUES ('notes', 'old', '{\"text\": \"cat\"}', 1.0, 1.0)")
    with open_store(store_url):
        assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [
            (HEAD_REVISION,)]
    store = HayataStore(store_url, index={
        "embed": lambda texts: [[float(t.count("cat")), 1.0] for t in texts], "dims": 2,
        "fields": ["text"]})
    try:
        store.put(("notes",), "new", {"text": "dog"}, index=False)
        found = store.search(("notes",), query="cat")
        assert [(i.key, i.score is not None) for i in found] == [("old", True), ("new", False)]
        assert raw_execute(store_url, "SELECT key, index_fields FROM hayata_serve_store_items "
                           "ORDER BY key") == [("new", "false"), ("old", None)]
    finally:
        store.close()
