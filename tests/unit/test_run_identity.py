"""Answers name the request they answer (``ref``) and streams the run they belong
to (``run``): a late answer or a late message of an earlier run is never taken
for the current one's (pure: the inbox and the ref check, no processes)."""

from __future__ import annotations

import pickle

import hayata_py as hy
from hayata_py._inbox import Inbox
from hayata_py.messages import AgentEvent, AgentResult


def test_an_error_answer_keeps_its_ref_across_pickling() -> None:
    err = hy.RunRejected("busy", code="agent_busy", running=2)
    err.ref = 41
    back = pickle.loads(pickle.dumps(err))
    assert (back.ref, back.code, back.details) == (41, "agent_busy", {"running": 2})
    assert pickle.loads(pickle.dumps(hy.RunRejected("x"))).ref == 0


def test_a_stream_takes_only_its_own_run_from_its_source() -> None:
    inbox = Inbox()
    source = "agent-process"
    # Late messages of the interrupted run 1 arrive before and after run 2 starts.
    inbox.deliver(source, AgentEvent("inv", "node_started", 2, {}, run=1))
    inbox.expect("inv", source, streamed=True, run=2)
    inbox.deliver(source, AgentEvent("inv", "node_completed", 3, {}, run=1))
    inbox.deliver(source, AgentResult("inv", False, None, None, status="interrupted", run=1))
    inbox.deliver(source, AgentEvent("inv", "invocation_started", 1, {}, run=2))
    inbox.deliver(source, AgentEvent("inv", "invocation_completed", 2, {}, run=2))
    inbox.deliver(source, AgentResult("inv", True, {"ok": 1}, run=2))
    first = inbox.next_message("inv", 5)
    assert isinstance(first, AgentEvent) and (first.run, first.sequence) == (2, 1)
    second = inbox.next_message("inv", 5)
    assert isinstance(second, AgentEvent) and (second.run, second.type) == (
        2, "invocation_completed")  # run 1's node_completed (also sequence 3) is gone
    last = inbox.next_message("inv", 5)
    assert isinstance(last, AgentResult) and last.ok and last.run == 2
