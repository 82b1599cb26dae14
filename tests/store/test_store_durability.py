"""Conformance: schema versions, corruption, durability and concurrency across processes."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from hayata_py._errors import CorruptRecord, SchemaTooNew, StaleWriter
from hayata_py.store import SqlTaskStore, open_store
from hayata_py.store._sql.schema import HEAD_REVISION
from tests.store.util import invocation, raw_execute, run_child, start_child, task

GARBAGE = b"\x01\xc1\xff\x00garbage"


def test_fresh_database_is_at_head(store: SqlTaskStore, store_url: str) -> None:
    """Opening an empty database creates the schema at the newest revision."""
    assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


def test_reopen_keeps_data(store: SqlTaskStore, store_url: str) -> None:
    """Opening an existing database again leaves schema and data as they were."""
    store.create_invocation(invocation(), owner="o1")
    with open_store(store_url) as again:
        assert again.get_invocation("inv-1") is not None
    assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


def test_base_revision_is_upgraded(store_url: str) -> None:
    """A database stamped at no revision (older) is upgraded to the newest one."""
    raw_execute(store_url, "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    with open_store(store_url) as opened:
        assert opened.get_invocation("x") is None
    assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


def test_newer_schema_refused_unchanged(store: SqlTaskStore, store_url: str) -> None:
    """An unknown (newer) revision raises SchemaTooNew and changes nothing."""
    store.create_invocation(invocation(), owner="o1")
    store.close()
    raw_execute(store_url, "UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(SchemaTooNew) as info:
        open_store(store_url)
    assert "9999_future" in str(info.value) and "upgrade hayata_py" in str(info.value).lower()
    assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [("9999_future",)]
    assert raw_execute(store_url, "SELECT invocation_id, token FROM hayata_invocations") == [
        ("inv-1", 1)
    ]


def test_corrupt_invocation_value(store: SqlTaskStore, store_url: str) -> None:
    """Garbage in a value column raises CorruptRecord naming the invocation and column."""
    store.create_invocation(invocation(), owner="o1")
    raw_execute(store_url, "UPDATE hayata_invocations SET state = :g", g=GARBAGE)
    with pytest.raises(CorruptRecord) as info:
        store.get_invocation("inv-1")
    assert info.value.details == {"record": "invocation inv-1", "column": "state"}


def test_corrupt_task_value(store: SqlTaskStore, store_url: str) -> None:
    """Garbage in a task's result raises CorruptRecord naming the task and column."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a")
    store.schedule_tasks([t], token=token)
    raw_execute(store_url, "UPDATE hayata_tasks SET result = :g", g=b"")
    with pytest.raises(CorruptRecord) as info:
        store.get_tasks("inv-1")
    assert info.value.details == {"record": f"task {t.task_id}", "column": "result"}


CHILD_WRITE = """
import sys
from hayata_py.store import InvocationRecord, TaskRecord, open_store, task_id_for
with open_store(sys.argv[1]) as s:
    tok = s.create_invocation(InvocationRecord("inv-c", "agent-c", "running", 2, {"k": 1}, "in"),
                              owner="child")
    t = TaskRecord(task_id_for("inv-c", 2, "n"), "inv-c", "ex", 2, "n")
    s.mark_started(t.task_id, token=tok, system_instance="child", attempt=1, task=t)
    s.mark_completed(t.task_id, token=tok, result={"done": True})
"""


def test_durable_across_processes(store: SqlTaskStore, store_url: str) -> None:
    """What a child process committed is read back by another process."""
    run_child(CHILD_WRITE, store_url)
    got = store.get_invocation("inv-c")
    assert got is not None and (got.step, got.state, got.input) == (2, {"k": 1}, "in")
    (t,) = store.get_tasks("inv-c")
    assert (t.status, t.result, t.system_instance) == ("completed", {"done": True}, "child")


CHILD_CLAIM = """
import sys
from hayata_py.store import open_store
with open_store(sys.argv[1]) as s:
    print(s.claim_invocation("inv-1", owner="child"))
"""


def test_fencing_across_processes(store: SqlTaskStore, store_url: str) -> None:
    """After another process claims, this process's old token is refused."""
    old = store.create_invocation(invocation(), owner="o1")
    assert run_child(CHILD_CLAIM, store_url).strip() == "2"
    with pytest.raises(StaleWriter):
        store.save_checkpoint(invocation(step=1), token=old)


def test_usable_in_forked_child(store: SqlTaskStore) -> None:
    """A store opened before os.fork works in the child and still in the parent."""
    token = store.create_invocation(invocation(), owner="o1")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            store.schedule_tasks([task("a")], token=token)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.schedule_tasks([task("b", branch=1)], token=token)
    assert [r.node_id for r in store.get_tasks("inv-1")] == ["a", "b"]


CHILD_WORKER = """
import json, sys
from hayata_py._errors import StaleWriter
from hayata_py.store import InvocationRecord, TaskRecord, open_store, task_id_for
url, n, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
stale = 0
with open_store(url) as s:
    own = f"inv-w{n}"
    tok = s.create_invocation(InvocationRecord(own, f"agent-w{n}", "running", 0, {}, None), owner=n)
    for i in range(rounds):
        t = TaskRecord(task_id_for(own, i, "x"), own, "ex", i, "x")
        s.schedule_tasks([t], token=tok)
        s.mark_started(t.task_id, token=tok, system_instance=n, attempt=1)
        s.mark_completed(t.task_id, token=tok, result=i)
        shared = s.claim_invocation("shared", owner=n)
        try:
            s.save_checkpoint(InvocationRecord("shared", "agent-s", "running", i, {"by": n}, None),
                              token=shared)
        except StaleWriter:
            stale += 1
print(json.dumps({"stale": stale}))
"""


def test_concurrent_writers_four_processes(store: SqlTaskStore) -> None:
    """Four processes writing at once all succeed; claims are counted exactly once."""
    store.create_invocation(invocation("shared", agent_id="agent-s"), owner="o1")
    rounds = 10
    procs = [
        start_child(CHILD_WORKER, store.url.render_as_string(False), str(n), str(rounds))
        for n in range(4)
    ]
    outputs = [p.communicate(timeout=90) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err
        json.loads(out)
    for n in range(4):
        tasks = store.get_tasks(f"inv-w{n}")
        assert [(t.step, t.status, t.result) for t in tasks] == [
            (i, "completed", i) for i in range(rounds)
        ]
    assert store.claim_invocation("shared", owner="final") == 1 + 4 * rounds + 1


CHILD_OPEN = """
import sys
from hayata_py.store import open_store
with open_store(sys.argv[1]) as s:
    print(s.get_invocation("x"))
"""


def test_concurrent_first_open(store_url: str) -> None:
    """Four processes opening a new database at once all succeed (one migrates)."""
    procs = [start_child(CHILD_OPEN, store_url) for _ in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        assert out.strip() == "None"
    assert raw_execute(store_url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


def test_concurrent_threads_share_a_store(store: SqlTaskStore) -> None:
    """Four threads writing through one store object all succeed."""

    def worker(n: int) -> int:
        iid = f"inv-t{n}"
        tok = store.create_invocation(invocation(iid, agent_id=iid), owner="o")
        for i in range(10):
            t = task("x", invocation_id=iid, step=i)
            store.mark_started(t.task_id, token=tok, system_instance="s", attempt=1, task=t)
            store.mark_completed(t.task_id, token=tok, result=i)
        return len(store.get_tasks(iid))

    with ThreadPoolExecutor(max_workers=4) as pool:
        counts = [f.result(timeout=60) for f in [pool.submit(worker, n) for n in range(4)]]
    assert counts == [10] * 4
