"""examples/openai_agent.py end to end on the official openai client, against
the scripted OpenAI-compatible server of tests/fake_openai.py on loopback:
real processes, real HTTP and server-sent events, a 429 and a 503 on the way."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import hayata_py as hy
from examples.openai_agent import config
from tests.fake_openai import FakeOpenAI, serve
from tests.helpers import collect, eventually, interruptible

ROOT = Path(__file__).resolve().parents[2]
ANSWER = ["I", " emailed", " the", " page", " to", " you:", " The", " launch", " is",
          " on", " 12", " May."]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeOpenAI, str]]:
    """The fake server, and the environment that points the example at it (set
    before the system starts: its processes inherit it)."""
    with serve() as (server, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "any-value")
        monkeypatch.setenv("OPENAI_MODEL", "fake-model")
        for var in ("NO_PROXY", "no_proxy"):  # a proxy of the machine's must not see loopback
            monkeypatch.setenv(var, "127.0.0.1")
        yield server, url


@pytest.fixture
def system(fake: tuple[FakeOpenAI, str], tmp_path: Path) -> Iterator[hy.AgentSystem]:
    with hy.AgentSystem(tmp_path / "data") as agents:
        yield agents


def partials(events: list[hy.AgentEvent]) -> list[str]:
    return [e.data["result"]["token"] for e in events if e.type == "node_partial_result"]


def test_streams_retries_pauses_for_approval_then_sends_once(
        system: hy.AgentSystem, fake: tuple[FakeOpenAI, str], tmp_path: Path) -> None:
    server, url = fake
    outbox = tmp_path / "outbox.jsonl"
    agent = system.start_agent(config())
    question = f"Read {url}/pages/launch and email it to team@example.com."
    inv = agent.run({"question": question, "outbox": str(outbox)},
                    subscriber=hy.CALLER, stream=True)
    events, paused = collect(agent, inv, timeout=90)

    assert paused.status == "paused" and paused.error is not None, paused
    call = paused.error.details["payload"]["approve_tool_call"]
    assert (call["name"], call["arguments"]) == ("send_email", {
        "to": "team@example.com", "subject": "From the page",
        "body": "The launch is on 12 May."}), "the page reached the model through the tool"
    assert not outbox.exists(), "nothing is sent before the approval"

    # The 429 and the 503 were retried by the runtime, each a durable attempt.
    retries = [(e.data["node_id"], e.data["attempt"], e.data["error"]["type"])
               for e in events if e.type == "node_retrying"]
    assert retries == [("model", 2, "RateLimitError"), ("fetch_page", 2, "ToolUnavailable")]
    tasks = [(t.node_id, t.status, t.attempt) for t, _ in agent.tasks(inv)]
    assert sorted(tasks) == [("fetch_page", "completed", 2), ("model", "completed", 1),
                             ("model", "completed", 2)]
    # The client retried nothing on its own: one request per recorded attempt.
    assert server.chat_statuses() == [429, 200, 200]
    pages = [(path, status) for _, path, status in server.requests if path.startswith("/pages")]
    assert pages == [("/pages/launch", 503), ("/pages/launch", 200)]
    # The first turn's text streamed, token by token, inside its model step.
    assert partials(events) == ["Let", " me", " read", " the", " page."]
    types = [e.type for e in events]
    first = types.index("node_partial_result")
    assert types[first - 1] == "node_started" and events[first - 1].data["node_id"] == "model"
    assert types[first + 5] == "node_completed"

    paused_at = events[-1].sequence  # invocation_paused: the log goes on from it
    agent.resume(inv, {"approve": True}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv, timeout=90)

    assert result.ok, result
    assert result.result["answer"] == "".join(ANSWER)
    assert partials(events) == ANSWER, "the final answer streamed in order"
    assert [e.sequence for e in events] == list(range(paused_at + 1, paused_at + 1 + len(events)))
    sent = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert len(sent) == 1, sent
    assert sent[0]["to"] == "team@example.com" and sent[0]["body"] == "The launch is on 12 May."
    assert server.chat_statuses() == [429, 200, 200, 200]
    assert server.models == {"fake-model"}, "OPENAI_MODEL reached the node's process"


def test_a_refused_email_is_not_sent_and_the_model_hears_why(
        system: hy.AgentSystem, fake: tuple[FakeOpenAI, str], tmp_path: Path) -> None:
    server, url = fake
    outbox = tmp_path / "outbox.jsonl"
    agent = system.start_agent(config())
    inv = agent.run({"question": f"Email {url}/pages/launch to team@example.com",
                     "outbox": str(outbox)})
    assert agent.wait(inv, 90).status == "paused"
    agent.resume(inv, {"approve": False, "why": "not yet"})
    result = agent.wait(inv, 90)
    assert result.ok, result
    assert result.result["answer"] == "Understood, I did not send the email."
    assert not outbox.exists()
    told = server.transcripts[-1][-1]
    assert (told["role"], told["content"]) == ("tool", "refused by the user: not yet")


def test_the_script_asks_for_approval_on_stdin(fake: tuple[FakeOpenAI, str],
                                               tmp_path: Path) -> None:
    """``python examples/openai_agent.py QUESTION``: the run, the approval read
    from stdin, the result; and every process it started is gone after it."""
    server, url = fake
    # Every process of the script's system inherits this file as its stderr:
    # that is how the test finds them (they live in sessions of their own).
    errors = tmp_path / "script.err"
    with errors.open("w") as stderr:
        script = subprocess.Popen(
            [sys.executable, "examples/openai_agent.py",
             f"Read {url}/pages/launch and email it to team@example.com"],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
            preexec_fn=interruptible)
    try:
        out, _ = script.communicate("y\n", timeout=90)
    except subprocess.TimeoutExpired:
        script.send_signal(signal.SIGINT)  # its `with AgentSystem` stops the system
        out, _ = script.communicate(timeout=30)
        pytest.fail(f"the script did not finish in 90 s:\n{out}\n{errors.read_text()}")
    finally:
        if script.poll() is None:
            script.kill()
            script.wait(10)
        try:
            eventually(lambda: not holding(errors), timeout=10,
                       message="no process of the script left")
        finally:
            for pid in holding(errors):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert script.returncode == 0, errors.read_text()
    assert "The model wants to call send_email" in out
    assert "Let me read the page.\n" in out and "".join(ANSWER) + "\n" in out
    assert "[node_retrying] fetch_page" in out, "retried by path, also as __main__"
    assert "ok=True" in out and '"to": "team@example.com"' in out
    assert server.chat_statuses() == [429, 200, 200, 200]


def holding(path: Path) -> list[int]:
    """Pids of the live processes that have ``path`` open."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and any(
                    f.path == str(path) for f in proc.open_files()):
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
