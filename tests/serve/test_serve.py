"""``hayata serve`` driven by the real ``langgraph-sdk`` clients: a server
subprocess (tests/serve/launch.py) serving tests/serve_api's graphs.

What is hayata's own beyond the conformance suite (tests/serve_api): every
SSE event carries its integer sequence in the run's durable log, a replay
from ``Last-Event-ID`` repeats exactly what followed, and a kill -9 of the
whole server (its actor processes too) mid-run loses nothing: after a
restart on the same data dir the run finishes, no node ran twice, and its
stream resumes from the last event the client had.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from hayata_py._errors import ConfigError
from hayata_py.serve import check_keep_alive
from hayata_py.serve._uncertain import RESOLVE_BODY
from tests.serve.launch import Served, hayata_serve, serve_command, serve_env, start
from tests.serve_api.reference import free_port
from tests.serve_api.support import ASK, STEPS, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with hayata_serve() as server:
        yield server


@pytest.fixture
def client(served: Served) -> Iterator[SyncLangGraphClient]:
    with get_sync_client(url=served.url, timeout=30.0) as sync_client:
        yield sync_client


def _events(parts: list[Any]) -> list[tuple[str, Any]]:
    return [(p.event, p.data) for p in parts]


def test_event_ids_are_the_logs_sequence_and_replay_exactly(
        client: SyncLangGraphClient) -> None:
    """Ids 1, 2, 3, ...; ``Last-Event-ID: k`` replays what followed k, ``-1`` all."""
    thread = client.threads.create()["thread_id"]
    full = list(client.runs.stream(thread, STEPS, input={"label": "r"},
                                   stream_mode=["values", "updates"]))
    assert [int(str(p.id)) for p in full] == list(range(1, len(full) + 1))
    assert full[0].event == "metadata"
    assert full[-1].data == {"label": "r", "steps": ["r:first", "r:middle", "r:last"]}
    run_id = full[0].data["run_id"]
    for k in (1, 3, len(full) - 1):
        tail = list(client.runs.join_stream(thread, run_id, last_event_id=str(k)))
        assert _events(tail) == _events(full[k:])
    replay = list(client.runs.join_stream(thread, run_id, last_event_id="-1"))
    assert _events(replay) == _events(full)


def test_enqueued_runs_run_in_order_on_one_thread(client: SyncLangGraphClient) -> None:
    """Two runs created at once on a thread: the second waits, then runs on the first's state."""
    thread = client.threads.create()["thread_id"]
    first = client.runs.create(thread, STEPS, input={"label": "a", "delay": 0.3})
    second = client.runs.create(thread, STEPS, input={"label": "b"})
    assert client.runs.get(thread, second["run_id"])["status"] == "pending"
    assert client.runs.join(thread, second["run_id"])["steps"] == [
        "a:first", "a:middle", "a:last", "b:first", "b:middle", "b:last"]
    assert client.runs.get(thread, first["run_id"])["status"] == "success"


def _answer(conn: socket.socket) -> bytes:
    """One whole HTTP answer (head and ``Content-Length`` body) read from ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, f"the connection closed mid-answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = conn.recv(4096)
        assert chunk, f"the connection closed mid-answer: {data!r}"
        body += chunk
    return head


def _idle_connection(url: str) -> tuple[socket.socket, bytes, float]:
    """A connection to ``url`` that has had one answer and is now idle; the
    request; ``time.monotonic()`` just before it was sent (the server's idle
    time starts after that)."""
    host, port = url.removeprefix("http://").split(":")
    request = f"GET /ok HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    conn = socket.create_connection((host, int(port)), timeout=10.0)
    sent = time.monotonic()
    conn.sendall(request)
    assert _answer(conn).startswith(b"HTTP/1.1 200")
    return conn, request, sent


def test_an_idle_connection_outlives_the_clients_pool_expiry(served: Served) -> None:
    """A keep-alive connection left idle past httpx's pool expiry (5 s, when
    uvicorn's default would close it) is still open and answers the next
    request: the client, not the server, drops an idle connection, so a
    request sent on one is never cut by the server closing it at that moment."""
    conn, request, sent = _idle_connection(served.url)
    with conn:
        # a close by the server would make the socket readable (EOF); the
        # window ends 5.5 s after the request was sent, so a slow reader of
        # the answer cannot stretch it past the server's idle time
        readable, _, _ = select.select([conn], [], [], sent + 5.5 - time.monotonic())
        assert readable == [], f"the server closed the idle connection: {conn.recv(4096)!r}"
        conn.sendall(request)
        assert _answer(conn).startswith(b"HTTP/1.1 200")


def test_keep_alive_sets_how_long_an_idle_connection_stays_open() -> None:
    """``--keep-alive 1``: the server closes an idle connection after about a
    second; a value out of range is refused by the API, naming it."""
    with pytest.raises(ConfigError) as refused:
        check_keep_alive(0)
    assert refused.value.details["field"] == "keep_alive"
    with hayata_serve(args=("--keep-alive", "1")) as server:
        conn, _, _ = _idle_connection(server.url)
        with conn:
            began = time.monotonic()
            readable, _, _ = select.select([conn], [], [], 30.0)
            assert readable == [conn] and conn.recv(4096) == b""
            assert time.monotonic() - began < 10.0


def test_join_keeps_a_long_wait_alive(served: Served, client: SyncLangGraphClient) -> None:
    """``join`` of a running run sends ``\\n`` while it waits (a client's read
    timeout shorter than the run does not end it), then the run's values."""
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, STEPS, input={"label": "j", "delay": 7.0})
    url = f"{served.url}/threads/{thread}/runs/{run['run_id']}/join"
    with httpx.stream("GET", url, timeout=httpx.Timeout(30.0, read=6.0)) as response:
        assert response.status_code == 200
        chunks = list(response.iter_bytes())
    body = b"".join(chunks)
    assert body.startswith(b"\n") and len(chunks) >= 2
    assert httpx.Response(200, content=body).json()["steps"] == ["j:first", "j:middle", "j:last"]


def test_interrupt_then_resume_with_the_async_client(served: Served) -> None:
    """``interrupt()``: run ``success``, ``__interrupt__`` in its values; ``Command(resume)``
    goes on."""
    async def main() -> None:
        client = get_client(url=served.url, timeout=30.0)
        try:
            thread = (await client.threads.create())["thread_id"]
            asked: Any = await client.runs.wait(thread, ASK, input={"question": "go?"})
            assert [i["value"] for i in asked["__interrupt__"]] == [{"question": "go?"}]
            assert (await client.threads.get(thread))["status"] == "interrupted"
            done = await client.runs.wait(thread, ASK, command={"resume": "yes"})
            assert done == {"question": "go?", "answer": "yes", "done": True}
            assert (await client.threads.get(thread))["status"] == "idle"
        finally:
            await client.aclose()
    asyncio.run(asyncio.wait_for(main(), 60))


def test_bad_input_is_a_422_naming_the_field(served: Served) -> None:
    """A wrong field is refused before anything is recorded, and named."""
    answer = httpx.post(f"{served.url}/runs/wait", json={"assistant_id": STEPS,
                                                         "stream_mode": "bogus"}, timeout=30)
    assert answer.status_code == 422
    assert "stream_mode" in answer.json()["detail"]


def _in_flight(served: Served, node: str) -> bool:
    """Whether the store records a task of ``node`` started and not finished."""
    with contextlib.closing(sqlite3.connect(served.data_dir / "hayata.db", timeout=5)) as db:
        row = db.execute("SELECT count(*) FROM hayata_tasks WHERE node_id = ? AND "
                         "status = 'started'", (node,)).fetchone()
    return bool(row[0])


def test_kill_9_mid_run_then_restart_resumes_the_stream(served: Served) -> None:
    """The whole server (actors too) killed while a run's middle node runs;
    restarted on its data dir, the run's stream resumes after the last event id
    the client had and ends asking about the node a crash left uncertain (an
    interrupt); answered ``{"rerun": True}``, the run finishes with no
    completed node run twice."""
    with get_sync_client(url=served.url, timeout=30.0) as client:
        thread = client.threads.create()["thread_id"]
        seen = []
        for part in client.runs.stream(thread, STEPS, input={"label": "k", "delay": 3.0},
                                       stream_mode=["values", "updates"]):
            seen.append(part)
            if part.event == "updates":
                break
        run_id = seen[0].data["run_id"]
        wait_until(lambda: _in_flight(served, "middle"), "the middle node in flight")
    served.kill()  # the whole host: the server and its actor processes
    served.process.wait(timeout=30)
    restarted = start(served.workdir, served.data_dir, served.log, port=served.port)
    served.process = restarted.process
    with get_sync_client(url=served.url, timeout=30.0) as client:
        rest = list(client.runs.join_stream(thread, run_id, last_event_id=seen[-1].id))
        ids = [int(str(p.id)) for p in seen + rest]
        assert ids == list(range(1, len(ids) + 1)), f"ids not 1, 2, ...: {ids}"
        last: Any = rest[-1].data if rest else None
        assert rest[-1].event == "values", [p.event for p in rest]
        [asked] = last["__interrupt__"]
        assert asked["value"]["uncertain"]["node"] == "middle"
        assert last["steps"] == ["k:first"]
        wait_until(lambda: client.runs.get(thread, run_id)["status"] == "success",
                   "the run done after the restart")
        assert client.threads.get(thread)["status"] == "interrupted"
        waiting: Any = client.runs.get(thread, run_id)
        task_id = asked["value"]["uncertain"]["task_id"]
        assert waiting["hayata"] == {"uncertain": [{
            "node": "middle", "task_id": task_id,
            "answers": asked["value"]["uncertain"]["answers"],
            "resolve": {"method": "POST",
                        "path": f"/hayata/threads/{thread}/tasks/{task_id}/resolve",
                        "body": RESOLVE_BODY}}],
            "abandon": {"method": "POST", "path": f"/hayata/threads/{thread}/abandon"}}
        assert set(waiting["hayata"]["uncertain"][0]["answers"]) == {
            "completed", "rerun", "abandon"}
        done: Any = client.runs.wait(thread, STEPS, command={"resume": {"rerun": True}})
        assert done["steps"] == ["k:first", "k:middle", "k:last"]
        for run in client.runs.list(thread):
            assert "hayata" not in client.runs.get(thread, run["run_id"]), run["run_id"]


def _session_alive(session: int) -> bool:
    """Whether any process of OS session ``session`` is still running (not a zombie)."""
    return bool(_session_pids(session))


def test_sigterm_stops_the_server_and_its_actors() -> None:
    """A TERM ends the server and every actor process of its system."""
    with hayata_serve() as server:
        session = server.session
        assert session is not None and _session_alive(session)
        server.process.terminate()
        server.process.wait(timeout=60)
        wait_until(lambda: not _session_alive(session), "the actor processes gone")


def _stream_until_middle(served: Served, label: str) -> tuple[str, str, list[Any]]:
    """A run of ``steps`` whose middle node waits 3 s, followed until that node
    is in flight: its thread, run id and the events seen."""
    with get_sync_client(url=served.url, timeout=30.0) as client:
        thread = client.threads.create()["thread_id"]
        seen = []
        for part in client.runs.stream(thread, STEPS, input={"label": label, "delay": 3.0},
                                       stream_mode=["values", "updates"]):
            seen.append(part)
            if part.event == "updates":
                break
        wait_until(lambda: _in_flight(served, "middle"), "the middle node in flight")
    return thread, seen[0].data["run_id"], seen


def _finish_after_restart(served: Served, thread: str, run_id: str, seen: list[Any],
                          label: str) -> None:
    """The restarted server carries the run on: its stream resumes after the
    last id seen and asks about the node the kill caught; answered, the
    thread's nodes ran once each."""
    with get_sync_client(url=served.url, timeout=30.0) as client:
        rest = list(client.runs.join_stream(thread, run_id, last_event_id=seen[-1].id))
        ids = [int(str(p.id)) for p in seen + rest]
        assert ids == list(range(1, len(ids) + 1)), f"ids not 1, 2, ...: {ids}"
        last: Any = rest[-1].data
        [asked] = last["__interrupt__"]
        assert asked["value"]["uncertain"]["node"] == "middle"
        assert last["steps"] == [f"{label}:first"]
        wait_until(lambda: client.runs.get(thread, run_id)["status"] == "success",
                   "the run done after the restart")
        done: Any = client.runs.wait(thread, STEPS, command={"resume": {"rerun": True}})
        assert done["steps"] == [f"{label}:first", f"{label}:middle", f"{label}:last"]


def test_kill_9_of_the_server_alone_ends_its_actors() -> None:
    """Only the server process SIGKILLed mid-run: every process of its actor
    session is gone within seconds (the system watches its owner); a restart
    on the data dir carries the run on, no completed node run again."""
    with hayata_serve() as served:
        session = served.session
        assert session is not None and _session_alive(session)
        thread, run_id, seen = _stream_until_middle(served, "o")
        os.kill(served.process.pid, signal.SIGKILL)
        killed = time.monotonic()
        served.process.wait(timeout=30)
        wait_until(lambda: not _session_alive(session), "no actor process left", timeout=10)
        print(f"actors gone {time.monotonic() - killed:.2f}s after the server's kill -9")
        restarted = start(served.workdir, served.data_dir, served.log, port=served.port)
        served.process = restarted.process
        assert served.session not in (None, session)
        _finish_after_restart(served, thread, run_id, seen, "o")


def _session_pids(session: int) -> list[int]:
    return [int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat")
            if _in_session(stat, session)]


def _in_session(stat: Path, session: int) -> bool:
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[3]) == session


def test_a_restart_kills_what_a_dead_server_left_before_starting() -> None:
    """A dead server's actors still there (stopped, so they cannot notice its
    death): the next server on the data dir kills them before it starts its
    own system, then carries the run on."""
    with hayata_serve() as served:
        session = served.session
        assert session is not None
        thread, run_id, seen = _stream_until_middle(served, "s")
        pids = _session_pids(session)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        os.kill(served.process.pid, signal.SIGKILL)
        served.process.wait(timeout=30)
        assert _session_alive(session), "the stopped actors are still there"
        restarted = start(served.workdir, served.data_dir, served.log, port=served.port)
        served.process = restarted.process
        assert not _session_alive(session), "the restart left the old actors running"
        assert f"killed {len(pids)} process(es) a dead server left" in served.log.read_text()
        _finish_after_restart(served, thread, run_id, seen, "s")


def test_a_second_server_on_a_data_dir_is_refused() -> None:
    """While a server runs on a data dir, another started there exits at once
    (status 1), naming the running server's pid; the first serves on."""
    with hayata_serve() as served:
        second = subprocess.run(
            serve_command(served.workdir, served.data_dir, free_port()),
            cwd=served.workdir, env=serve_env(), capture_output=True, timeout=60)
        assert second.returncode == 1, second.stderr.decode()
        assert f"pid {served.process.pid}" in second.stderr.decode()
        assert httpx.get(f"{served.url}/ok", timeout=10).status_code == 200


def _hayata(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hayata_py", *args, "--data-dir",
                           str(served.data_dir)], capture_output=True, text=True, timeout=120,
                          env=serve_env())


def test_the_hayata_commands_reach_the_servers_system(served: Served,
                                                      client: SyncLangGraphClient) -> None:
    """The server records its system as `hayata system start` does: `ps`,
    `tasks` and `kill` reach it; `system stop`, `kill` and `start` are refused,
    naming the server, which serves on; after its agent is SIGKILLed through
    `hayata kill`, its next run completes."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, STEPS, input={"label": "cli"})
    tree = _hayata(served, "ps")
    assert tree.returncode == 0, tree.stderr
    assert "agent:serve.steps" in tree.stdout and "node:middle" in tree.stdout
    tasks = _hayata(served, "tasks", "serve.steps")
    assert tasks.returncode == 0, tasks.stderr
    assert "middle" in tasks.stdout and "completed" in tasks.stdout
    for refused in (("system", "stop"), ("system", "kill"), ("system", "start")):
        answer = _hayata(served, *refused)
        assert answer.returncode == 1, (refused, answer.stdout, answer.stderr)
        assert f"`hayata serve` (pid {served.process.pid})" in answer.stderr, answer.stderr
    killed = _hayata(served, "kill", "serve.steps", "--agent")
    assert killed.returncode == 0 and "agent actor of serve.steps" in killed.stdout, killed
    done: Any = client.runs.wait(thread, STEPS, input={"label": "after"})
    assert done["steps"][-3:] == ["after:first", "after:middle", "after:last"]
